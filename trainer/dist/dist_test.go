package dist

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestFromEnv(t *testing.T) {
	l, err := FromEnv(env())
	if l != nil || err != nil {
		t.Fatalf("no launcher: %v %v", l, err)
	}
	l, err = FromEnv(env("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "1"))
	if err != nil || *l != (Launch{Launcher: MPIRun, Rank: 1, World: 2, LocalRank: 1}) {
		t.Fatalf("mpirun: %+v %v", l, err)
	}
	l, err = FromEnv(env("RANK", "3", "WORLD_SIZE", "4", "LOCAL_RANK", "1", "MASTER_ADDR", "node0", "MASTER_PORT", "29500"))
	if err != nil || *l != (Launch{Launcher: TorchRun, Rank: 3, World: 4, LocalRank: 1, Master: "node0:29500"}) {
		t.Fatalf("torchrun: %+v %v", l, err)
	}
	for _, c := range []struct {
		env  func(string) string
		want string
	}{
		{env("RANK", "0", "WORLD_SIZE", "2"), "MASTER_ADDR and MASTER_PORT are not set"},
		{env("RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1"), "want 0 <= rank < world"},
		{env("WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1"), "RANK is not set"},
		{env("OMPI_COMM_WORLD_RANK", "x", "OMPI_COMM_WORLD_SIZE", "2"), `OMPI_COMM_WORLD_RANK="x"`},
		{env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "99999"), "MASTER_PORT"},
		{env("RANK", "0", "WORLD_SIZE", "1", "MASTER_PORT", "5"), "must be set together"},
	} {
		_, err := FromEnv(c.env)
		if !errors.Is(err, ErrEnv) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want ErrEnv with %q", err, c.want)
		}
	}
}

// group runs the rendezvous for world ranks on loopback, rank 0 handing
// out blob, and returns every rank's monitor and what it received.
func group(t *testing.T, world int, blob []byte, o Options) ([]*Monitor, [][]byte) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	ms, blobs, errs := make([]*Monitor, world), make([][]byte, world), make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r == 0 {
				time.Sleep(50 * time.Millisecond) // the others dial before rank 0 is up
				ms[0], errs[0] = Serve(context.Background(), lis, world, blob, o)
				blobs[0] = blob
				return
			}
			ms[r], blobs[r], errs[r] = Join(context.Background(), addr, r, world, o)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return ms, blobs
}

// TestRendezvous hands a 128-byte blob (NCCL's unique id) to 4 ranks,
// then ends normally: nobody reports a failure.
func TestRendezvous(t *testing.T) {
	id := make([]byte, 128)
	for i := range id {
		id[i] = byte(i * 7)
	}
	ms, blobs := group(t, 4, id, Options{Heartbeat: 10 * time.Millisecond})
	for r, b := range blobs {
		if string(b) != string(id) {
			t.Errorf("rank %d got %x", r, b)
		}
	}
	time.Sleep(50 * time.Millisecond) // a few heartbeats
	for r, m := range ms {
		if err := m.Err(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	for r := len(ms) - 1; r >= 1; r-- {
		ms[r].Close(nil)
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case <-ms[0].Failed():
		t.Errorf("goodbyes taken for failures: %v", ms[0].Err())
	default:
	}
	// A collective after a peer left would wait forever: Err says so.
	if err := ms[0].Err(); err == nil || !strings.Contains(err.Error(), "has finished and left") {
		t.Errorf("rank 0 after the others left: %v", err)
	}
	ms[0].Close(nil)
}

// TestRankDeath: a rank whose connection drops without a goodbye (its
// process died) is named to every other rank at once; one that fails with
// an error tells them the error; a silent one is declared dead after
// DeadAfter.
func TestRankDeath(t *testing.T) {
	for _, c := range []struct {
		name, want string
		dead       int
		kill       func(m *Monitor)
	}{
		{"killed", "is gone: its connection closed without a goodbye", 2, die},
		{"rank 0 killed", "is gone", 0, die},
		{"failed", "failed: stream broke", 1, func(m *Monitor) { m.Close(errors.New("stream broke")) }},
		{"silent", "sent nothing for 300ms", 1, func(m *Monitor) { close(m.stop) }}, // heartbeats stop, socket stays
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			called := map[int]error{}
			ms := make([]*Monitor, 3)
			o := func(r int) Options {
				return Options{Heartbeat: 20 * time.Millisecond, DeadAfter: 300 * time.Millisecond,
					OnFailure: func(err error) { mu.Lock(); called[r] = err; mu.Unlock() }}
			}
			lis, _ := net.Listen("tcp", "127.0.0.1:0")
			var wg sync.WaitGroup
			for r := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var err error
					if r == 0 {
						ms[0], err = Serve(context.Background(), lis, 3, nil, o(0))
					} else {
						ms[r], _, err = Join(context.Background(), lis.Addr().String(), r, 3, o(r))
					}
					if err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			t0 := time.Now()
			c.kill(ms[c.dead])
			for r, m := range ms {
				if r == c.dead {
					continue
				}
				select {
				case <-m.Failed():
				case <-time.After(5 * time.Second):
					t.Fatalf("rank %d never noticed", r)
				}
				var pe *PeerError
				if err := m.Err(); !errors.As(err, &pe) || pe.Rank != c.dead || !strings.Contains(err.Error(), c.want) ||
					!strings.Contains(err.Error(), fmt.Sprintf("rank %d (pid ", c.dead)) {
					t.Errorf("rank %d: %v, want rank %d named with %q", r, err, c.dead, c.want)
				}
			}
			t.Logf("noticed by all in %v", time.Since(t0))
			n := 0 // OnFailure runs just after Failed closes
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				mu.Lock()
				n = len(called)
				mu.Unlock()
				if n == 2 {
					break
				}
			}
			if n != 2 {
				t.Errorf("OnFailure called on %d ranks, want 2", n)
			}
			for _, m := range ms {
				m.Close(nil)
			}
		})
	}
}

// TestRendezvousRejects: a rank of another world, or a duplicate, fails
// rank 0's rendezvous naming it.
func TestRendezvousRejects(t *testing.T) {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go Join(context.Background(), lis.Addr().String(), 1, 3, Options{JoinTimeout: time.Second})
	_, err := Serve(context.Background(), lis, 2, nil, Options{JoinTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "belongs to a world of 3") {
		t.Fatalf("got %v", err)
	}
	l := &Launch{Launcher: TorchRun, Rank: 1, World: 2}
	if _, _, err := Rendezvous(context.Background(), l, nil, Options{}); !errors.Is(err, ErrEnv) {
		t.Fatalf("no MASTER_ADDR: %v", err)
	}
	if _, err := InitMPI(context.Background(), l, "", Options{}); !errors.Is(err, ErrBackend) ||
		!strings.Contains(err.Error(), "mpirun") {
		t.Fatalf("torchrun launch on MPI: %v", err)
	}
}

// die ends a monitor as a killed process would: its sockets close, it
// says nothing and notices nothing.
func die(m *Monitor) {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.closeAll()
}

func TestInitNCCLWithoutLibrary(t *testing.T) {
	l := &Launch{Launcher: TorchRun, Rank: 0, World: 2, Master: "127.0.0.1:1"}
	_, err := InitNCCL(context.Background(), l, nil, t.TempDir()+"/libnccl.so.2", Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "nccl: library not found") {
		t.Fatalf("got %v", err)
	}
}
