package mpi

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// cnnParams is the default CNN's parameter count: the gradient DDP
// all-reduces every step.
var cnnParams = func() int {
	m, err := nn.NewCNN(nn.DefaultCNN)
	if err != nil {
		panic(err)
	}
	dev, _ := tensor.NewCPU("cpu", 1)
	defer dev.Close()
	model, err := nn.NewModel(dev, m, nn.CIFAR, 0)
	if err != nil {
		panic(err)
	}
	return model.NumParams()
}()

// BenchmarkAllReduce78k averages the CNN's 78,042 gradients over two
// ranks: in one process over host memory (what `--mode ddp --devices 2`
// does), and between two processes over MPI (`mpirun -n 2`), both on CPU
// devices. The mpi case starts mpirun once per b.N and reports the time
// rank 0 measured per all-reduce (ns/allreduce; ns/op includes mpirun's
// start).
func BenchmarkAllReduce78k(b *testing.B) {
	b.Run("host-1-process", func(b *testing.B) {
		devs := []tensor.Device{}
		for i := range 2 {
			d, _ := tensor.NewCPU(fmt.Sprintf("cpu:%d", i), 1)
			defer d.Close()
			devs = append(devs, d)
		}
		comms, _ := parallel.NewHostGroup(devs)
		bufs := make([]tensor.Buffer, 2)
		for i, d := range devs {
			bufs[i], _ = d.Alloc(tensor.F32, cnnParams)
		}
		b.ResetTimer()
		for range b.N {
			var wg sync.WaitGroup
			for r := range 2 {
				wg.Add(1)
				go func() { defer wg.Done(); comms[r].AllReduce(bufs[r], parallel.Avg) }()
			}
			wg.Wait()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/allreduce")
	})
	b.Run("mpi-2-processes", func(b *testing.B) {
		bin := mpirun(b)
		cmd := exec.Command(bin, "--allow-run-as-root", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1", "-n", "2",
			"-x", "LOADERD_MPI_TEST_CHILD=1", "-x", "LOADERD_MPI_BENCH_N="+strconv.Itoa(b.N),
			os.Args[0], "-test.run=^TestAllReduceBenchRank$")
		cmd.Env = append(os.Environ(), "LOADERD_MPI_TEST_CHILD=1", "LOADERD_MPI_BENCH_N="+strconv.Itoa(b.N))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		m := regexp.MustCompile(`allreduce-ns: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			b.Fatalf("no timing in:\n%s", out)
		}
		ns, _ := strconv.ParseFloat(string(m[1]), 64)
		b.ReportMetric(ns, "ns/allreduce")
	})
}

// TestAllReduceBenchRank is one rank of BenchmarkAllReduce78k's mpi case.
func TestAllReduceBenchRank(t *testing.T) {
	if !underMPI() {
		t.Skip("a rank of BenchmarkAllReduce78k")
	}
	n, _ := strconv.Atoi(os.Getenv("LOADERD_MPI_BENCH_N"))
	c, err := Init("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Finalize()
	dev, _ := tensor.NewCPU("cpu", 1)
	defer dev.Close()
	buf, _ := dev.Alloc(tensor.F32, cnnParams)
	if err := c.AllReduce(buf, parallel.Avg); err != nil { // warm-up
		t.Fatal(err)
	}
	t0 := time.Now()
	for range n {
		if err := c.AllReduce(buf, parallel.Avg); err != nil {
			t.Fatal(err)
		}
	}
	if c.Rank() == 0 {
		fmt.Printf("allreduce-ns: %.0f\n", float64(time.Since(t0).Nanoseconds())/float64(max(n, 1)))
	}
}
