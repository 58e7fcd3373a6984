package dist

import (
	"context"
	"fmt"
	"sync"

	"github.com/loaderd/loaderd/trainer/nccl"
)

// InitNCCL joins the job l describes with NCCL collectives on dev (one
// GPU per rank: LOCAL_RANK picks it): rank 0 makes the unique id,
// Rendezvous hands it out on MASTER_ADDR:MASTER_PORT, every rank calls
// ncclCommInitRank. When another rank fails the monitor aborts the
// communicator (ncclCommAbort), so a collective waiting for it ends.
func InitNCCL(ctx context.Context, l *Launch, dev nccl.Device, libPath string, o Options) (*Group, error) {
	lib, err := nccl.Load(libPath)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var comm *nccl.Comm
	var failure error
	user := o.OnFailure
	o.OnFailure = func(err error) {
		mu.Lock()
		c := comm
		failure = err
		mu.Unlock()
		if c != nil {
			c.Abort(err)
		}
		if user != nil {
			user(err)
		}
	}
	m, id, err := Rendezvous(ctx, l, lib.NewUniqueID, o)
	if err != nil {
		return nil, err
	}
	c, err := lib.InitRank(dev, l.World, l.Rank, id)
	if err != nil {
		m.Close(err)
		return nil, fmt.Errorf("dist: %v: %w", l, err)
	}
	mu.Lock()
	comm = c
	if failure != nil {
		c.Abort(failure)
	}
	mu.Unlock()
	return &Group{Collective: Guard(c, m), Launch: l, Monitor: m, end: c.Destroy}, nil
}
