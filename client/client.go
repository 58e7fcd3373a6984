package client

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"

	"github.com/loaderd/loaderd/client/wire"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// Client is a connection to a loaderd daemon. It is safe for concurrent use.
type Client struct {
	conn *grpc.ClientConn
	api  pb.LoaderClient
	sock string // the daemon's Unix socket path, when dialled through one
}

// Dial connects to target: "host:port", or "unix:///path/to.sock" for a
// daemon on the same host. Extra options are appended to the defaults.
func Dial(target string, opts ...grpc.DialOption) (*Client, error) {
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// gRPC's default of 4 MiB is below one batch of 512 f32 CIFAR images.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(wire.MaxMessageSize)),
		// Large windows and buffers keep a loopback link full of batches.
		grpc.WithInitialWindowSize(wire.InitialWindowSize),
		grpc.WithInitialConnWindowSize(wire.InitialConnWindowSize),
		grpc.WithReadBufferSize(wire.ReadBufferSize),
		grpc.WithWriteBufferSize(wire.WriteBufferSize),
		experimental.WithBufferPool(wire.Pool),
	}
	conn, err := grpc.NewClient(target, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", target, err)
	}
	return &Client{conn: conn, api: pb.NewLoaderClient(conn), sock: unixPath(target)}, nil
}

// Datasets lists the datasets the daemon serves.
func (c *Client) Datasets(ctx context.Context) ([]*pb.Dataset, error) {
	resp, err := c.api.ListDatasets(ctx, &pb.ListDatasetsRequest{})
	if err != nil {
		return nil, fmt.Errorf("client: list datasets: %w", err)
	}
	return resp.GetDatasets(), nil
}

// Conn returns the underlying connection (for health checks).
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Close closes the connection; open streams fail.
func (c *Client) Close() error { return c.conn.Close() }

// unixPath returns the socket path of a "unix:PATH" or "unix://PATH"
// target, or "".
func unixPath(target string) string {
	if p, ok := strings.CutPrefix(target, "unix://"); ok {
		return p
	}
	if p, ok := strings.CutPrefix(target, "unix:"); ok {
		return p
	}
	return ""
}
