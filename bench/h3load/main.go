// h3load: an HTTP/3 load generator on quic-go, for bench/http3.sh (the h2load here has no
// HTTP/3).
//
// Modes:
//
//	requests    -c connections, each with -m requests in flight at once (one goroutine per
//	            stream, each sending its next request when the last one's body is read), for -d.
//	handshakes  -c goroutines, each opening a new QUIC connection (a full handshake) for every
//	            request, for -d.
//	resumed     as handshakes, with a shared session cache: every handshake after a goroutine's
//	            first resumes a session (TLS 1.3 ticket).
//
// Prints one JSON object: requests done, errors, seconds, requests/s, p50 and p99 latency (ms),
// body bytes, and how many handshakes resumed (DidResume).
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func main() {
	addr := flag.String("addr", "", "host:port")
	host := flag.String("host", "localhost", "name in the URL and the SNI")
	path := flag.String("path", "/", "path")
	conns := flag.Int("c", 10, "connections (requests mode) or goroutines (handshake modes)")
	streams := flag.Int("m", 1, "requests in flight per connection (requests mode)")
	duration := flag.Duration("d", 10*time.Second, "how long")
	mode := flag.String("mode", "requests", "requests, handshakes or resumed")
	flag.Parse()

	var cache tls.ClientSessionCache
	if *mode == "resumed" {
		cache = tls.NewLRUClientSessionCache(4096)
	}
	newTransport := func() *http3.Transport {
		return &http3.Transport{
			TLSClientConfig: &tls.Config{
				InsecureSkipVerify: true, // the bench's certificates are self-made
				ServerName:         *host,
				NextProtos:         []string{http3.NextProtoH3},
				ClientSessionCache: cache,
			},
			QUICConfig: &quic.Config{MaxIdleTimeout: 30 * time.Second},
			Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
				return quic.DialAddr(ctx, *addr, tlsCfg, cfg)
			},
		}
	}
	url := "https://" + *host + *path
	var done, errors, bytes, resumed atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	deadline := time.Now().Add(*duration)
	one := func(client *http.Client) (bool, time.Duration) {
		start := time.Now()
		resp, err := client.Get(url)
		if err != nil {
			errors.Add(1)
			return false, 0
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			errors.Add(1)
			return false, 0
		}
		if resp.TLS != nil && resp.TLS.DidResume {
			resumed.Add(1)
		}
		bytes.Add(n)
		done.Add(1)
		return true, time.Since(start)
	}
	var wg sync.WaitGroup
	started := time.Now()
	for i := 0; i < *conns; i++ {
		switch *mode {
		case "requests":
			tr := newTransport()
			client := &http.Client{Transport: tr}
			for j := 0; j < *streams; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for time.Now().Before(deadline) {
						if ok, d := one(client); ok {
							mine = append(mine, d)
						}
					}
					mu.Lock()
					latencies = append(latencies, mine...)
					mu.Unlock()
				}()
			}
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for time.Now().Before(deadline) {
					tr := newTransport()
					if ok, d := one(&http.Client{Transport: tr}); ok {
						mine = append(mine, d)
					}
					tr.Close()
				}
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	seconds := time.Since(started).Seconds()
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	out, _ := json.Marshal(map[string]any{
		"requests": done.Load(), "errors": errors.Load(), "seconds": seconds,
		"rps": float64(done.Load()) / seconds, "p50_ms": pct(0.5), "p99_ms": pct(0.99),
		"bytes": bytes.Load(), "resumed": resumed.Load(),
	})
	fmt.Println(string(out))
	if done.Load() == 0 {
		os.Exit(1)
	}
}
