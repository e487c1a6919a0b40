// An ext_proc processor written against Envoy's own generated Go API
// (github.com/envoyproxy/go-control-plane), serving on a Unix socket: used to check that
// Sluice's protobuf subset is wire-compatible with real Envoy processors.
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
)

type server struct {
	extprocv3.UnimplementedExternalProcessorServer
}

func set(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

func get(h *extprocv3.HttpHeaders, key string) (string, bool) {
	for _, e := range h.GetHeaders().GetHeaders() {
		if e.Key == key {
			if len(e.RawValue) > 0 {
				return string(e.RawValue), true
			}
			return e.Value, true
		}
	}
	return "", false
}

func (s *server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var resp *extprocv3.ProcessingResponse
		switch r := req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			path, _ := get(r.RequestHeaders, ":path")
			if strings.HasPrefix(path, "/blocked") {
				resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
					ImmediateResponse: &extprocv3.ImmediateResponse{
						Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
						Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("x-extproc-demo", "immediate")}},
						Body:    []byte("blocked by go processor\n"),
						Details: "go-blocked",
					}}}
			} else {
				resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
					RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
						HeaderMutation: &extprocv3.HeaderMutation{
							SetHeaders:    []*corev3.HeaderValueOption{set("x-extproc-demo", "request")},
							RemoveHeaders: []string{"x-demo-remove"},
						}}}}}
			}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			status, _ := get(r.ResponseHeaders, ":status")
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
				ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
					HeaderMutation: &extprocv3.HeaderMutation{
						SetHeaders: []*corev3.HeaderValueOption{
							set("x-extproc-demo", "response"),
							set("x-extproc-demo-pid", fmt.Sprint(os.Getpid())),
							set("x-go-saw-status", status),
						},
						RemoveHeaders: []string{"x-origin-secret"},
					}}}}}
		default:
			resp = &extprocv3.ProcessingResponse{}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func main() {
	socket := os.Getenv("SLUICE_EXTPROC_SOCKET")
	if len(os.Args) > 2 && os.Args[1] == "--socket" {
		socket = os.Args[2]
	}
	os.Remove(socket)
	lis, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, &server{})
	log.Fatal(g.Serve(lis))
}
