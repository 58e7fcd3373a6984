package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/client/wire"
	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// Dataset is a source registered under a name clients use.
type Dataset struct {
	Name    string
	Spec    string // FORMAT:PATH it was opened from
	Source  loader.Source
	Augment string // default augmentation for streams that name none

	fp fingerprint // computed in the background from New on (fingerprint.go)
}

// Options configure a Server.
type Options struct {
	Workers    int          // worker goroutines shared by every stream (with AutoWorkers, the most active)
	MaxStreams int          // streams served at once; 0 is unlimited
	Logger     *slog.Logger // nil: slog.Default()
	Registry   *prometheus.Registry
	IdlePools  int           // pinned pools kept for reuse after streams end; default 8
	IdleTTL    time.Duration // how long an idle pool is kept; default 30 s
	AckTimeout time.Duration // how long a finished stream waits for its last acks

	// MemoryLimit bounds the daemon's batch memory: every stream's pinned
	// pool, the idle pools kept for reuse, the workers' scratch, and the
	// datasets' decoded caches (?cache=decoded, reserved at start). An
	// Open that does not fit is refused with RESOURCE_EXHAUSTED. Default:
	// DefaultMemoryLimit.
	MemoryLimit int64

	// FdSocket names the Unix socket, next to the daemon's own, that
	// ServeFds answers on; shared-memory clients are told to fetch their
	// region there. Empty: clients open /proc/<pid>/fd/<n> instead.
	FdSocket string

	// OnError: fail a stream at an unreadable sample (the default), or
	// skip it, delivering a neighbour, counting and logging it.
	OnError  loader.ErrorPolicy
	MaxSkips int64

	// AutoWorkers lets the daemon set how many of the Workers take work,
	// from 1 up, by the clients' reported waits and the workers' busy time
	// (autotune.go): cores the loading does not need go back to the
	// trainer. It starts at 1.
	AutoWorkers bool

	// Security, if set, is the TLS and the bearer tokens of the TCP
	// listeners (Serve on anything but a Unix socket); nil serves TCP as
	// the Unix socket, in plaintext without tokens.
	Security *Security
}

// Server serves loaderd.v1.Loader.
type Server struct {
	pb.UnimplementedLoaderServer

	opts     Options
	log      *slog.Logger
	datasets map[string]*Dataset
	pool     *loader.Pool
	slots    *poolCache
	opens    *openGate     // Opens' costly part, a few at a time, connections in turn
	gets     chan struct{} // GetSamples calls being served (getsamples.go)
	mem      *budget
	fds      *fdBroker
	metrics  *metrics
	floods   floodPeers   // peers whose connections flooded (connlimits.go)
	live     *streamTable // open streams' counters (metrics.go)
	health   *health.Server
	grpc     *grpc.Server // the Unix socket's
	tcp      *grpc.Server // TCP listeners': grpc itself without Options.Security

	mu       sync.Mutex
	streams  int
	stopping chan struct{} // closed when shutdown begins: streams end with UNAVAILABLE
	stopOnce sync.Once
}

// New builds a server over datasets (which it owns from now on).
func New(opts Options, datasets ...*Dataset) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.IdlePools == 0 {
		opts.IdlePools = 8
	}
	if opts.AckTimeout == 0 {
		opts.AckTimeout = 30 * time.Second
	}
	if opts.IdleTTL == 0 {
		opts.IdleTTL = 30 * time.Second
	}
	if opts.MemoryLimit == 0 {
		opts.MemoryLimit = DefaultMemoryLimit()
	}
	if opts.Workers < 1 {
		opts.Workers = 1
	}
	mem := newBudget(opts.MemoryLimit)
	s := &Server{opts: opts, log: opts.Logger, datasets: map[string]*Dataset{}, mem: mem,
		stopping: make(chan struct{}), slots: newPoolCache(mem, opts.IdlePools, opts.IdleTTL), fds: newFdBroker(),
		opens: newOpenGate(gateWidth()), gets: make(chan struct{}, getsWidth)}
	s.fds.instrument(opts.Logger, opts.Registry) // the hand-over socket's logs and metrics (fdsocket.go)
	// Each worker keeps a sample buffer, and a decoder about as large.
	var scratch int64
	for _, d := range datasets {
		sample := int64(d.Source.Spec().Bytes())
		if sz, ok := loader.As[loader.SizedSource](d.Source); ok { // images of any size: the largest it admits
			sample = sz.MaxPixels() * int64(d.Source.Spec().C)
		}
		scratch = max(scratch, 2*sample*int64(opts.Workers))
	}
	if err := mem.reserve(memScratch, scratch); err != nil {
		return nil, fmt.Errorf("server: worker scratch for the largest sample: %w (raise --memory-limit)", err)
	}
	if err := reserveCaches(mem, datasets); err != nil {
		return nil, err
	}
	for _, d := range datasets {
		if _, dup := s.datasets[d.Name]; dup {
			return nil, fmt.Errorf("server: dataset %q registered twice", d.Name)
		}
		if d.Augment == "" {
			d.Augment = DefaultAugment(d.Source.Spec())
		}
		s.datasets[d.Name] = d
	}
	for _, d := range datasets { // New fails no more: a source is closed only after its fingerprint
		d.startFingerprint(s.log)
	}
	s.metrics = newMetrics(opts.Registry, s)
	registerCacheMetrics(opts.Registry, s)
	s.live = newStreamTable(s.metrics)
	s.pool = loader.NewPool(opts.Workers)
	if opts.AutoWorkers {
		s.pool.SetActive(1)
		go s.autotune(defaultTuneConfig(opts.Workers), autoTick)
	}
	go s.slots.janitor(s.stopping)
	s.health = health.NewServer()
	s.grpc = s.newGRPC()
	s.tcp = s.grpc
	if opts.Security != nil {
		// gRPC takes one credentials setting per server: TLS and the token
		// checks need a second one, with the same services.
		s.tcp = s.newGRPC(opts.Security.serverOptions()...)
		opts.Security.register(opts.Registry)
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(pb.Loader_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return s, nil
}

// newGRPC builds a gRPC server with the Loader, health and reflection
// services, and extra options after the common ones.
func (s *Server) newGRPC(extra ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(append([]grpc.ServerOption{
		grpc.MaxSendMsgSize(wire.MaxMessageSize),
		grpc.MaxRecvMsgSize(wire.MaxRequestSize),
		grpc.InitialWindowSize(wire.InitialWindowSize),
		grpc.InitialConnWindowSize(wire.InitialConnWindowSize),
		grpc.WriteBufferSize(wire.WriteBufferSize),
		grpc.ReadBufferSize(wire.ReadBufferSize),
		grpc.ForceServerCodecV2(codec{}),
		experimental.BufferPool(wire.Pool),
		grpc.StatsHandler(connTracker{}),
		grpc.MaxConcurrentStreams(maxConnStreams),
		grpc.InTapHandle(s.tapStreams),
	}, extra...)...)
	pb.RegisterLoaderServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	return g
}

// DefaultAugment is the classic CIFAR training transform sized to spec:
// RandomCrop(H, padding=4), RandomHorizontalFlip, ToTensor, Normalize.
func DefaultAugment(spec augment.Spec) string {
	if spec.H == 0 && spec.W == 0 && spec.C == 3 {
		// Images of any size: torchvision's ImageNet training transform.
		return "random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw"
	}
	if spec.H == 32 && spec.W == 32 && spec.C == 3 {
		return augment.FormatOps(augment.CIFARTrain(sample.F32, sample.CHW))
	}
	if spec.C == 3 && spec.H == spec.W {
		return fmt.Sprintf("crop=%d:4,flip=0.5,normalize=cifar10,out=f32:chw", spec.H)
	}
	return "out=f32:chw"
}

// GRPC returns the Unix socket's gRPC server, for serving on more
// listeners: no TLS, no tokens. Without Options.Security, TCP listeners
// are served by the same one.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Serve accepts connections on lis until Shutdown: a Unix socket's on the
// plain server, any other's (TCP) with Options.Security's TLS and tokens.
func (s *Server) Serve(lis net.Listener) error {
	// So that a flood's connection can be closed, and its peer's next
	// ones refused.
	lis = trackListener{Listener: lis, floods: &s.floods, refused: func(string) { s.metrics.floodConnsRefused.Inc() }}
	if lis.Addr().Network() == "unix" {
		return s.grpc.Serve(lis)
	}
	return s.tcp.Serve(lis)
}

// ServeFds hands shared-memory regions to their clients on lis, a Unix
// socket named Options.FdSocket in the directory of the daemon's own, until
// Shutdown. See ShmRegion.fd_socket in loader.proto for the exchange.
func (s *Server) ServeFds(lis net.Listener) error { return s.fds.serve(lis) }

// MetricsHandler serves the Prometheus metrics.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{})
}

// Shutdown marks the server NOT_SERVING, ends every stream with
// UNAVAILABLE (clients resume from their next position), and stops
// gracefully; past ctx's deadline it stops hard.
func (s *Server) Shutdown(ctx context.Context) {
	s.health.Shutdown()
	s.stopOnce.Do(func() { close(s.stopping) })
	done := make(chan struct{})
	servers := []*grpc.Server{s.grpc}
	if s.tcp != s.grpc {
		servers = append(servers, s.tcp)
	}
	go func() {
		var wg sync.WaitGroup
		for _, g := range servers {
			wg.Go(g.GracefulStop)
		}
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("graceful stop timed out; stopping hard")
		for _, g := range servers {
			g.Stop()
		}
		// Not <-done: GracefulStop waits for every handler, and one may be
		// waiting for a worker stuck in a read that never returns.
	}
	stuck := s.pool.CloseContext(ctx)
	s.fds.close()
	s.slots.close()
	if stuck != nil {
		// A stuck worker may still read the sources: they stay open, for
		// the process's exit to release.
		s.log.Warn("workers still busy at the shutdown deadline; leaving them to the exit", "err", stuck)
		return
	}
	if !s.waitFingerprints(ctx) {
		s.log.Warn("a dataset fingerprint still being computed at the shutdown deadline; leaving the sources to the exit")
		return
	}
	for _, d := range s.datasets {
		d.Source.Close()
	}
}

// ListDatasets describes every registered dataset, sorted by name.
func (s *Server) ListDatasets(ctx context.Context, _ *pb.ListDatasetsRequest) (*pb.ListDatasetsResponse, error) {
	names := make([]string, 0, len(s.datasets))
	for n := range s.datasets {
		names = append(names, n)
	}
	sort.Strings(names)
	resp := &pb.ListDatasetsResponse{}
	for _, n := range names {
		d := s.datasets[n]
		fp, err := d.fingerprintRPC(ctx)
		if err != nil {
			return nil, err
		}
		sp := d.Source.Spec()
		format, _, _ := strings.Cut(d.Spec, ":")
		resp.Datasets = append(resp.Datasets, &pb.Dataset{
			Name: n, Format: format, Size: d.Source.Len(), Classes: d.Source.Classes(),
			Shape:          &pb.ImageShape{Height: int32(sp.H), Width: int32(sp.W), Channels: int32(sp.C)},
			Layout:         pb.Layout(sp.Layout),
			DefaultAugment: d.Augment,
			Fingerprint:    fp,
			EpochSamples:   epochSamples(d.Source),
		})
	}
	return resp, nil
}

func (s *Server) acquireStream() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.MaxStreams > 0 && s.streams >= s.opts.MaxStreams {
		return false
	}
	s.streams++
	return true
}

func (s *Server) releaseStream() {
	s.mu.Lock()
	s.streams--
	s.mu.Unlock()
}

// ActiveStreams returns the number of streams being served.
func (s *Server) ActiveStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams
}

var errStopping = errors.New("loaderd is shutting down")

// decodeGate is the gate Run gives imagedec: decodes of large images in
// the memory budget.
func (s *Server) decodeGate() decodeGate { return decodeGate{b: s.mem, evict: s.slots.evictOldest} }
