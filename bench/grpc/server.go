// Command server is bench/grpc.sh's backend: the service bench.B of bench.proto over cleartext
// HTTP/2 (h2c), fast enough that the proxy in front of it, not the backend, is what a run measures.
//
// No generated code: the service descriptor is written by hand and its messages are
// wrapperspb.BytesValue, whose single field (bytes value = 1) is bench.M's `bytes d = 1` on the wire.
//
//	Unary   echoes the request.
//	Stream  answers each request with -stream-msgs messages of -stream-size bytes.
//
// With -status, a plain HTTP listener answers GET / with the connections the gRPC listener has
// accepted and the calls it has served ("accepts N\ncalls N\n"), so a run can count the new
// upstream connections a proxy made.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var (
	accepts atomic.Uint64
	calls   atomic.Uint64
)

// countingListener counts the connections it accepts.
type countingListener struct{ net.Listener }

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		accepts.Add(1)
	}
	return c, err
}

// bench implements bench.B; its stream answer is built once and sent as often as asked.
type bench struct {
	streamMsgs int
	streamMsg  *wrapperspb.BytesValue
}

func unaryHandler(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.BytesValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	calls.Add(1)
	echo := func(context.Context, any) (any, error) { return in, nil }
	if icpt == nil {
		return echo(ctx, in)
	}
	return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/bench.B/Unary"}, echo)
}

func streamHandler(srv any, stream grpc.ServerStream) error {
	b := srv.(*bench)
	in := new(wrapperspb.BytesValue)
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	calls.Add(1)
	for i := 0; i < b.streamMsgs; i++ {
		if err := stream.SendMsg(b.streamMsg); err != nil {
			return err
		}
	}
	return nil
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: "bench.B",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Unary", Handler: unaryHandler}},
	Streams:     []grpc.StreamDesc{{StreamName: "Stream", Handler: streamHandler, ServerStreams: true}},
	Metadata:    "bench.proto",
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "gRPC (h2c) listen address")
	status := flag.String("status", "", "plain HTTP listen address of the counters; empty = none")
	streamMsgs := flag.Int("stream-msgs", 100, "messages per Stream call")
	streamSize := flag.Int("stream-size", 1024, "bytes per Stream message")
	flag.Parse()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *status != "" {
		sl, err := net.Listen("tcp", *status)
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			log.Fatal(http.Serve(sl, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprintf(w, "accepts %d\ncalls %d\n", accepts.Load(), calls.Load())
			})))
		}()
	}
	srv := grpc.NewServer()
	srv.RegisterService(&serviceDesc, &bench{
		streamMsgs: *streamMsgs,
		streamMsg:  &wrapperspb.BytesValue{Value: make([]byte, *streamSize)},
	})
	log.Fatal(srv.Serve(countingListener{ln}))
}
