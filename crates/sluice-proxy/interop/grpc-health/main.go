// A gRPC server and client on grpc-go, for Sluice's HTTP/2-to-origin interoperability test
// (crates/sluice-proxy/tests/origin_h2.rs): the standard health service and a bidirectional
// echo stream, over plain-text HTTP/2 (h2c, prior knowledge) on 127.0.0.1.
//
//	grpc-health serve            serves; prints "listening ADDR", stops when stdin closes
//	grpc-health check ADDR       calls the service at ADDR (Sluice) and prints one line a call
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func init() { encoding.RegisterCodec(rawCodec{}) }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grpc-health serve | check ADDR")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve()
	case "check":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: grpc-health check ADDR")
			os.Exit(2)
		}
		check(os.Args[2])
	default:
		fmt.Fprintln(os.Stderr, "usage: grpc-health serve | check ADDR")
		os.Exit(2)
	}
}

// rawCodec carries messages as they are (content-type application/grpc+raw): the echo
// service below needs no generated code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// echoService is sluice.Echo: Chat, a bidirectional stream that answers each message
// with "echo " and the message, as soon as it comes.
var echoService = grpc.ServiceDesc{
	ServiceName: "sluice.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Chat",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			for {
				var message []byte
				if err := stream.RecvMsg(&message); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
				reply := append([]byte("echo "), message...)
				if err := stream.SendMsg(&reply); err != nil {
					return err
				}
			}
		},
	}},
}

// serve runs the health service: "" and "sluice.Test" serving, "sluice.Down" not serving;
// and sluice.Echo.
func serve() {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server := grpc.NewServer()
	healthServer := health.NewServer()
	healthServer.SetServingStatus("sluice.Test", healthpb.HealthCheckResponse_SERVING)
	healthServer.SetServingStatus("sluice.Down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(server, healthServer)
	server.RegisterService(&echoService, struct{}{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		server.Stop()
	}()
	fmt.Printf("listening %s\n", listener.Addr())
	if err := server.Serve(listener); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// check makes unary calls (a service that serves, one that does not, an unknown one, which
// the server answers with a trailers-only NOT_FOUND) and reads the first two messages of a
// server stream, printing "<call> <result>" for each.
func check(addr string) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for _, service := range []string{"", "sluice.Test", "sluice.Down", "sluice.Unknown"} {
		reply, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			fmt.Fprintf(out, "check %q %s\n", service, status.Code(err))
			continue
		}
		fmt.Fprintf(out, "check %q %s\n", service, reply.GetStatus())
	}
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "sluice.Test"})
	if err != nil {
		fmt.Fprintf(out, "watch %s\n", status.Code(err))
		return
	}
	first, err := stream.Recv()
	if err != nil {
		fmt.Fprintf(out, "watch %s\n", status.Code(err))
		return
	}
	fmt.Fprintf(out, "watch %s\n", first.GetStatus())
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		fmt.Fprintf(out, "watch-end %s\n", status.Code(err))
		return
	}
	fmt.Fprintln(out, "watch-end Canceled")
	chat(conn, out)
}

// chat sends three messages on one sluice.Echo/Chat stream, each only once the answer to the
// one before has come back (both directions open at once), then closes its side.
func chat(conn *grpc.ClientConn, out *bufio.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := conn.NewStream(ctx, &echoService.Streams[0], "/sluice.Echo/Chat", grpc.CallContentSubtype("raw"))
	if err != nil {
		fmt.Fprintf(out, "chat %s\n", status.Code(err))
		return
	}
	for i := 1; i <= 3; i++ {
		message := []byte(fmt.Sprintf("ping %d", i))
		if err := stream.SendMsg(&message); err != nil {
			fmt.Fprintf(out, "chat send %s\n", status.Code(err))
			return
		}
		var reply []byte
		if err := stream.RecvMsg(&reply); err != nil {
			fmt.Fprintf(out, "chat receive %s\n", status.Code(err))
			return
		}
		fmt.Fprintf(out, "chat %s\n", reply)
	}
	if err := stream.CloseSend(); err != nil {
		fmt.Fprintf(out, "chat close %s\n", status.Code(err))
		return
	}
	var none []byte
	if err := stream.RecvMsg(&none); err == io.EOF {
		fmt.Fprintln(out, "chat end")
	} else {
		fmt.Fprintf(out, "chat end %s\n", status.Code(err))
	}
}
