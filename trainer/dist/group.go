package dist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/loaderd/loaderd/trainer/mpi"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// ErrBackend reports a launch the chosen collective backend cannot serve.
var ErrBackend = errors.New("dist: unsupported launch for the backend")

// Group is this process's rank of a multi-process job: a Collective whose
// calls fail fast, naming the rank, once another rank has failed.
type Group struct {
	parallel.Collective
	Launch  *Launch
	Monitor *Monitor
	end     func() error
}

// Close leaves the group (cause nil: normally; else telling the others
// why this rank stops) and releases the backend.
func (g *Group) Close(cause error) error {
	g.Monitor.Close(cause)
	if g.end != nil {
		return g.end()
	}
	return nil
}

// guarded wraps a backend's Collective with the failure monitor.
type guarded struct {
	c parallel.Collective
	m *Monitor
}

// Guard returns c checked against m before and after every collective: a
// call made after another rank failed returns at once, and a call that
// failed because of it says which rank it was. Abort tells the other ranks.
func Guard(c parallel.Collective, m *Monitor) parallel.Collective { return &guarded{c: c, m: m} }

func (g *guarded) Rank() int { return g.c.Rank() }
func (g *guarded) Size() int { return g.c.Size() }

func (g *guarded) Abort(cause error) {
	g.m.Close(cause)
	g.c.Abort(cause)
}

func (g *guarded) do(call func() error) error {
	if err := g.m.Err(); err != nil {
		return fmt.Errorf("%w: %w", parallel.ErrAborted, err)
	}
	err := call()
	if err != nil {
		// A peer's death can reach the backend before the monitor:
		// give the monitor a moment to name the rank.
		select {
		case <-g.m.Failed():
		case <-time.After(2 * time.Second):
		}
		if merr := g.m.Err(); merr != nil {
			return fmt.Errorf("%w: %w (%v)", parallel.ErrAborted, merr, err)
		}
	}
	return err
}

func (g *guarded) AllReduce(b tensor.Buffer, op parallel.Op) error {
	return g.do(func() error { return g.c.AllReduce(b, op) })
}

func (g *guarded) Reduce(b tensor.Buffer, op parallel.Op, root int) error {
	return g.do(func() error { return g.c.Reduce(b, op, root) })
}

func (g *guarded) Broadcast(b tensor.Buffer, root int) error {
	return g.do(func() error { return g.c.Broadcast(b, root) })
}

// InitMPI joins the job l describes with MPI collectives (Open MPI's
// libmpi from mpiPath, or the loader's path when empty): the backend for
// CPU devices. The processes must be started by mpirun: MPI itself wires
// the ranks together, and rank 0 broadcasts over it the address of the
// failure monitor (MASTER_ADDR:MASTER_PORT when set, else an ephemeral port
// on rank 0's host name).
func InitMPI(ctx context.Context, l *Launch, mpiPath string, o Options) (*Group, error) {
	if l.Launcher != MPIRun {
		return nil, fmt.Errorf("%w: %s set RANK/WORLD_SIZE, but collectives between CPU processes run on MPI: "+
			"start the ranks with mpirun (Open MPI), or use GPUs and NCCL with a torchrun-style launch", ErrBackend, l.Launcher)
	}
	c, err := mpi.Init(mpiPath)
	if err != nil {
		return nil, err
	}
	if c.Rank() != l.Rank || c.Size() != l.World {
		c.Finalize()
		return nil, fmt.Errorf("%w: the environment says %v, MPI says rank %d of %d (was the job started by Open MPI's mpirun?)",
			ErrBackend, l, c.Rank(), c.Size())
	}
	m, err := rendezvousMPI(ctx, l, c, o)
	if err != nil {
		c.Finalize()
		return nil, err
	}
	return &Group{Collective: Guard(c, m), Launch: l, Monitor: m, end: c.Finalize}, nil
}

// rendezvousMPI starts the monitor: rank 0 listens, MPI broadcasts the
// address, the others join.
func rendezvousMPI(ctx context.Context, l *Launch, c *mpi.Comm, o Options) (*Monitor, error) {
	var buf [256]byte
	var lis net.Listener
	if l.Rank == 0 {
		var err error
		if lis, err = listen(l.Master); err != nil {
			copy(buf[:], "!"+err.Error()) // tell the others instead of leaving them waiting
		} else {
			copy(buf[:], advertise(l.Master, lis.Addr()))
		}
	}
	if err := c.BroadcastBytes(buf[:], 0); err != nil {
		if lis != nil {
			lis.Close()
		}
		return nil, fmt.Errorf("dist: rank %d: monitor address: %w", l.Rank, err)
	}
	addr := string(bytes.TrimRight(buf[:], "\x00"))
	if len(addr) > 0 && addr[0] == '!' {
		return nil, fmt.Errorf("dist: rank 0 cannot listen for the failure monitor: %s", addr[1:])
	}
	if l.Rank == 0 {
		return Serve(ctx, lis, l.World, nil, o)
	}
	m, _, err := Join(ctx, addr, l.Rank, l.World, o)
	return m, err
}

func listen(master string) (net.Listener, error) {
	if master == "" {
		return net.Listen("tcp", ":0")
	}
	_, port, _ := net.SplitHostPort(master)
	return net.Listen("tcp", net.JoinHostPort("", port)) // every interface, like torch's store
}

// advertise is the address other ranks dial: MASTER_ADDR when given, else
// this host's name, with the listener's port.
func advertise(master string, a net.Addr) string {
	port := strconv.Itoa(a.(*net.TCPAddr).Port)
	if master != "" {
		host, _, _ := net.SplitHostPort(master)
		return net.JoinHostPort(host, port)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Rendezvous runs torch's env:// rendezvous for a backend that needs one
// blob from rank 0 (NCCL's unique id): rank 0 listens on l.Master
// (MASTER_ADDR:MASTER_PORT) and hands newBlob()'s result to every rank,
// which dials it, retrying until rank 0 is up. The connections then carry
// the failure monitor.
func Rendezvous(ctx context.Context, l *Launch, newBlob func() ([]byte, error), o Options) (*Monitor, []byte, error) {
	if l.Master == "" {
		return nil, nil, fmt.Errorf("%w: MASTER_ADDR and MASTER_PORT must name rank 0's rendezvous "+
			"(torchrun sets them; with mpirun pass -x MASTER_ADDR=host -x MASTER_PORT=port)", ErrEnv)
	}
	if l.Rank != 0 {
		return Join(ctx, l.Master, l.Rank, l.World, o)
	}
	blob, err := newBlob()
	if err != nil {
		return nil, nil, err
	}
	lis, err := listen(l.Master)
	if err != nil {
		return nil, nil, fmt.Errorf("dist: rank 0: rendezvous: %w", err)
	}
	m, err := Serve(ctx, lis, l.World, blob, o)
	return m, blob, err
}
