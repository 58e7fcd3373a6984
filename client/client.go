package client

import (
	"context"
	"errors"
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
	conn     *grpc.ClientConn
	api      pb.LoaderClient
	sock     string      // the daemon's Unix socket path, when dialled through one
	pool     *poolTarget // set when target names a pool of daemons
	dialOpts []grpc.DialOption
}

// Dial connects to target: "host:port", or "unix:///path/to.sock" for a
// daemon on the same host, or a pool of daemons that serve the same
// datasets: "host1:port,host2:port", or "dns:///name:port" for a name that
// resolves to several (looked up again as PoolConfig.Resolve says). A
// stream over a pool spreads its batches over the daemons and survives
// losing any of them (see Client.Open). Extra options are appended to the
// defaults.
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
	all := append(base, opts...)
	pool, err := parsePool(target)
	if err != nil {
		return nil, err
	}
	first := target
	if pool != nil {
		// The unary calls go to the first daemon named (or the name);
		// streams open their own connection to each daemon.
		first = memberTarget(strings.Split(target, ",")[0])
		if pool.host != "" {
			first = target
		}
	}
	conn, err := grpc.NewClient(first, all...)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", target, err)
	}
	c := &Client{conn: conn, api: pb.NewLoaderClient(conn), pool: pool, dialOpts: all}
	if pool == nil {
		c.sock = unixPath(target)
	}
	return c, nil
}

// Datasets lists the datasets the daemon serves (of a pool, the first
// daemon that answers).
func (c *Client) Datasets(ctx context.Context) ([]*pb.Dataset, error) {
	resp, err := c.api.ListDatasets(ctx, &pb.ListDatasetsRequest{})
	if err != nil && c.pool != nil {
		resp, err = c.poolDatasets(ctx, err)
	}
	if err != nil {
		return nil, fmt.Errorf("client: list datasets: %w", err)
	}
	return resp.GetDatasets(), nil
}

// poolDatasets asks the pool's daemons in turn, after the first failed.
func (c *Client) poolDatasets(ctx context.Context, first error) (*pb.ListDatasetsResponse, error) {
	addrs, err := c.pool.resolve(ctx)
	if err != nil {
		return nil, errors.Join(first, err)
	}
	errs := []error{first}
	for _, a := range addrs {
		conn, err := grpc.NewClient(memberTarget(a), c.dialOpts...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := pb.NewLoaderClient(conn).ListDatasets(ctx, &pb.ListDatasetsRequest{})
		conn.Close()
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
	}
	return nil, errors.Join(errs...)
}

// Conn returns the underlying connection (for health checks); of a pool,
// the connection to its first daemon.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Pool reports whether the client was dialled to a pool of daemons.
func (c *Client) Pool() bool { return c.pool != nil }

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
