package mpi

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// mpirun returns the launcher, or skips (fails when LOADERD_REQUIRE_MPI=1,
// as scripts/test.sh sets after scripts/mpi-setup.sh).
func mpirun(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("mpirun")
	if err == nil {
		if _, err = Load(""); err == nil {
			return p
		}
	}
	if os.Getenv("LOADERD_REQUIRE_MPI") == "1" {
		t.Fatalf("Open MPI required (LOADERD_REQUIRE_MPI=1): %v", err)
	}
	t.Skipf("no Open MPI here (scripts/mpi-setup.sh installs it): %v", err)
	return ""
}

// underMPI reports whether this test binary is a rank started by mpirun.
func underMPI() bool { return os.Getenv("LOADERD_MPI_TEST_CHILD") == "1" }

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "libmpi.so.40"))
	if !errors.Is(err, ErrNotFound) || !strings.HasPrefix(err.Error(), "mpi: ") {
		t.Fatalf("got %v, want an mpi: error wrapping ErrNotFound", err)
	}
	// A library that is not Open MPI: a clean ErrSymbol, no panic.
	if _, err := os.Stat("/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		_, err := Load("/lib/x86_64-linux-gnu/libc.so.6")
		if !errors.Is(err, ErrSymbol) || !strings.Contains(err.Error(), "MPI_") {
			t.Fatalf("libc: got %v, want ErrSymbol naming an MPI function", err)
		}
	}
}

// TestCollectivesUnderMPIRun starts this test binary as two ranks under
// mpirun; each checks AllReduce, Reduce, Broadcast and BroadcastBytes
// against the values every rank can compute.
func TestCollectivesUnderMPIRun(t *testing.T) {
	if underMPI() {
		if err := rankChecks(); err != nil {
			t.Fatal(err)
		}
		return
	}
	bin := mpirun(t)
	cmd := exec.Command(bin, "--allow-run-as-root", "--oversubscribe", "-n", "2", "-x", "LOADERD_MPI_TEST_CHILD=1",
		os.Args[0], "-test.run=^TestCollectivesUnderMPIRun$", "-test.v")
	cmd.Env = append(os.Environ(), "LOADERD_MPI_TEST_CHILD=1")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("mpirun -n 2 (%v):\n%s", time.Since(t0).Round(time.Millisecond), out)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "--- PASS: TestCollectivesUnderMPIRun"); n != 2 {
		t.Fatalf("%d ranks passed, want 2", n)
	}
}

func rankChecks() error {
	c, err := Init("")
	if err != nil {
		return err
	}
	defer c.Finalize()
	if c.Size() != 2 {
		return fmt.Errorf("world of %d, want 2", c.Size())
	}
	dev, err := tensor.NewCPU("cpu", 1)
	if err != nil {
		return err
	}
	defer dev.Close()
	r := float32(c.Rank())
	b, _ := dev.Alloc(tensor.F32, 3)
	get := func() []float32 { h := make([]float32, 3); dev.CopyOut(h, b); return h }
	set := func(v ...float32) { dev.CopyIn(b, v) }
	want := func(what string, got []float32, w ...float32) error {
		for i := range w {
			if got[i] != w[i] {
				return fmt.Errorf("rank %v: %s gave %v, want %v", r, what, got, w)
			}
		}
		return nil
	}
	set(1+r, 10*r, 0.5)
	if err := c.AllReduce(b, parallel.Sum); err != nil {
		return err
	}
	if err := want("sum", get(), 3, 10, 1); err != nil {
		return err
	}
	set(1+r, 10*r, 0.5)
	if err := c.AllReduce(b, parallel.Avg); err != nil {
		return err
	}
	if err := want("avg", get(), 1.5, 5, 0.5); err != nil {
		return err
	}
	set(1+r, 2, 3)
	if err := c.Reduce(b, parallel.Sum, 1); err != nil {
		return err
	}
	if r == 1 {
		err = want("reduce at root", get(), 3, 4, 6)
	} else {
		err = want("reduce elsewhere", get(), 1, 2, 3)
	}
	if err != nil {
		return err
	}
	set(7+r, 8+r, 9+r)
	if err := c.Broadcast(b, 1); err != nil {
		return err
	}
	if err := want("broadcast", get(), 8, 9, 10); err != nil {
		return err
	}
	p := []byte("........")
	if r == 0 {
		copy(p, "rank0!!!")
	}
	if err := c.BroadcastBytes(p, 0); err != nil {
		return err
	}
	if string(p) != "rank0!!!" {
		return fmt.Errorf("rank %v: BroadcastBytes gave %q", r, p)
	}
	c.Abort(errors.New("test"))
	if err := c.AllReduce(b, parallel.Sum); !errors.Is(err, parallel.ErrAborted) {
		return fmt.Errorf("after Abort: %v", err)
	}
	return nil
}
