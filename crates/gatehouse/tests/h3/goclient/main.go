// An HTTP/3 client on quic-go (Go's QUIC and HTTP/3 stack), for the end-to-end tests: a second,
// independent client beside aioquic's (../client.py).
//
// Sends -n requests at once over one QUIC connection to -addr, for https://HOST/PATH with the
// certificate checked against -ca for HOST, and prints one JSON object: per response the status,
// protocol, body length and SHA-256, or the error.
//
//	h3client -addr 127.0.0.1:PORT -host shop.test -ca ca.pem [-path /x] [-n 1]
//	         [-method GET] [-body-file F]
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

type result struct {
	Status int    `json:"status,omitempty"`
	Proto  string `json:"proto,omitempty"`
	Length int    `json:"length"`
	Sha256 string `json:"sha256,omitempty"`
	AltSvc string `json:"alt_svc,omitempty"`
	Error  string `json:"error,omitempty"`
}

func main() {
	addr := flag.String("addr", "", "host:port to connect to")
	host := flag.String("host", "localhost", "name in the URL, the SNI and the certificate check")
	caFile := flag.String("ca", "", "CA certificate (PEM)")
	path := flag.String("path", "/", "path and query")
	n := flag.Int("n", 1, "requests sent at once on one connection")
	method := flag.String("method", "GET", "method")
	bodyFile := flag.String("body-file", "", "request body")
	certFile := flag.String("cert", "", "client certificate and its key (one PEM file)")
	pq := flag.Bool("pq", false, "offer the X25519MLKEM768 key share first: a ClientHello longer than one packet")
	flag.Parse()

	fail := func(err error) {
		out, _ := json.Marshal(map[string]string{"error": err.Error()})
		fmt.Println(string(out))
		os.Exit(2)
	}
	roots := x509.NewCertPool()
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fail(err)
		}
		roots.AppendCertsFromPEM(pem)
	}
	var body []byte
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			fail(err)
		}
		body = b
	}
	tlsConfig := &tls.Config{RootCAs: roots, ServerName: *host, NextProtos: []string{http3.NextProtoH3}}
	if *certFile != "" {
		pem, err := os.ReadFile(*certFile)
		if err != nil {
			fail(err)
		}
		pair, err := tls.X509KeyPair(pem, pem)
		if err != nil {
			fail(err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	if *pq {
		tlsConfig.CurvePreferences = []tls.CurveID{tls.X25519MLKEM768, tls.X25519}
	}
	tr := &http3.Transport{
		TLSClientConfig: tlsConfig,
		QUICConfig:      &quic.Config{MaxIdleTimeout: 20 * time.Second},
		Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, *addr, tlsCfg, cfg)
		},
	}
	defer tr.Close()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	results := make([]result, *n)
	var wg sync.WaitGroup
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var reader io.Reader
			if body != nil {
				reader = bytes.NewReader(body)
			}
			req, err := http.NewRequest(*method, "https://"+*host+*path, reader)
			if err != nil {
				results[i] = result{Error: err.Error()}
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				results[i] = result{Error: err.Error()}
				return
			}
			defer resp.Body.Close()
			h := sha256.New()
			length, err := io.Copy(h, resp.Body)
			r := result{Status: resp.StatusCode, Proto: resp.Proto, Length: int(length), Sha256: hex.EncodeToString(h.Sum(nil)), AltSvc: resp.Header.Get("Alt-Svc")}
			if err != nil {
				r.Error = err.Error()
			}
			results[i] = r
		}(i)
	}
	wg.Wait()
	out, _ := json.Marshal(map[string]any{"responses": results})
	fmt.Println(string(out))
}
