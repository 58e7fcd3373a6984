package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/trainer"
	"github.com/loaderd/loaderd/trainer/mpi"
	"github.com/loaderd/loaderd/trainer/nn"
)

// needMPI returns mpirun's path, or skips the test; with
// LOADERD_REQUIRE_MPI=1 (scripts/test.sh) a missing Open MPI fails it.
func needMPI(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("mpirun")
	if err == nil {
		_, err = mpi.Load("")
	}
	if err != nil {
		if os.Getenv("LOADERD_REQUIRE_MPI") == "1" {
			t.Fatalf("Open MPI required (LOADERD_REQUIRE_MPI=1): %v", err)
		}
		t.Skipf("no Open MPI (scripts/mpi-setup.sh installs it): %v", err)
	}
	return p
}

// mpiTrainer starts this test binary as the trainer command under
// `mpirun -n 2`, tagging the ranks' environment with job so that they can
// be found in /proc.
func mpiTrainer(t *testing.T, mpirun, job string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	full := append([]string{"--allow-run-as-root", "--oversubscribe", "-n", "2",
		"-x", "TRAINER_TEST_MAIN=1", "-x", "LOADERD_TEST_JOB=" + job, os.Args[0]}, args...)
	// Waiting ranks yield the core instead of spinning: the daemon and the
	// other rank share these two cores.
	full = append([]string{"--mca", "mpi_yield_when_idle", "1"}, full...)
	cmd := exec.Command(mpirun, full...)
	cmd.Env = append(os.Environ(), "TRAINER_TEST_MAIN=1", "LOADERD_TEST_JOB="+job)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// weights reads a checkpoint's model arrays.
func weights(t *testing.T, path string) []nn.Array {
	t.Helper()
	ck, err := trainer.ReadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	arrs, err := nn.ReadArrays(bytes.NewReader(ck.Model))
	if err != nil {
		t.Fatal(err)
	}
	return arrs
}

// maxDiff returns the largest |a−b| over every value, and whether the
// arrays match bit for bit.
func maxDiff(t *testing.T, a, b []nn.Array) (float64, bool) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d arrays against %d", len(a), len(b))
	}
	d, same := 0.0, true
	for i := range a {
		if a[i].Name != b[i].Name || len(a[i].Data) != len(b[i].Data) {
			t.Fatalf("array %d: %s[%d] against %s[%d]", i, a[i].Name, len(a[i].Data), b[i].Name, len(b[i].Data))
		}
		for j, v := range a[i].Data {
			w := b[i].Data[j]
			if math.Float32bits(v) != math.Float32bits(w) {
				same = false
			}
			d = max(d, math.Abs(float64(v)-float64(w)))
		}
	}
	return d, same
}

var sampleLine = regexp.MustCompile(`^epoch (\d+) batch (\d+) rank (\d+):((?: \d+)*)$`)

// readSamples parses a --samples file: "epoch/batch" → rank → indices.
func readSamples(t *testing.T, path string) map[string]map[int][]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[int][]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("bad samples line %q", sc.Text())
		}
		key, rank := m[1]+"/"+m[2], 0
		rank, _ = strconv.Atoi(m[3])
		if out[key] == nil {
			out[key] = map[int][]int64{}
		}
		if _, dup := out[key][rank]; dup {
			t.Fatalf("step %s: rank %d logged twice", key, rank)
		}
		for _, s := range strings.Fields(m[4]) {
			v, _ := strconv.ParseInt(s, 10, 64)
			out[key][rank] = append(out[key][rank], v)
		}
	}
	return out
}

// rankPid finds the process of rank of the mpirun job tagged job.
func rankPid(job string, rank int) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, d := range dirs {
		env, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		vars := strings.Split(string(env), "\x00")
		var tagged, isRank bool
		for _, v := range vars {
			tagged = tagged || v == "LOADERD_TEST_JOB="+job
			isRank = isRank || v == fmt.Sprintf("OMPI_COMM_WORLD_RANK=%d", rank)
		}
		if tagged && isRank {
			pid, _ := strconv.Atoi(strings.Split(d, "/")[2])
			return pid
		}
	}
	return 0
}

// TestMPITrain trains the default CNN (78,042 parameters) with two
// processes under `mpirun -n 2`, both fed by one daemon, and checks:
//   - the weights equal those of the in-process `--mode ddp --devices 2`
//     run on the same data (tolerance 1e-6 absolute; they are in fact
//     bit-identical: the same sums in the same order);
//   - each step's two rank batches are disjoint, every epoch covers the
//     128 samples exactly once, and the ranks saw what the in-process
//     ranks saw;
//   - killing rank 1 mid-run makes rank 0 exit within seconds with an
//     error naming rank 1, and rerunning the command resumes from rank 0's
//     checkpoint and ends bit-identical to the uninterrupted run.
func TestMPITrain(t *testing.T) {
	mpirun := needMPI(t)
	const n, steps = 128, 2 * 128 / 32 // 2 epochs of 4 steps
	addr := startDaemonN(t, n)
	dir := t.TempDir()
	args := func(ckpt, samples string) []string {
		return []string{"train", "--addr", addr, "--dataset", "train", "--model", "cnn", "--batch", "32",
			"--epochs", "2", "--goroutines", "1", "--lr", "0.2", "--seed", "3", "--checkpoint-every", "1",
			"--quiet", "--checkpoint", filepath.Join(dir, ckpt), "--samples", filepath.Join(dir, samples)}
	}

	t0 := time.Now()
	cmd, out := mpiTrainer(t, mpirun, "full", args("mpi.ckpt", "mpi.samples")...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	t.Logf("mpirun -n 2, %d steps: %v\n%s", steps, time.Since(t0).Round(time.Millisecond), out)
	t0 = time.Now()
	if _, errs, code := runTrainer(t, append(args("inproc.ckpt", "inproc.samples"), "--mode", "ddp", "--devices", "2")...); code != 0 {
		t.Fatalf("in-process ddp: exit %d\n%s", code, errs)
	}
	t.Logf("in-process ddp, 2 devices: %v", time.Since(t0).Round(time.Millisecond))

	full := weights(t, filepath.Join(dir, "mpi.ckpt"))
	d, same := maxDiff(t, full, weights(t, filepath.Join(dir, "inproc.ckpt")))
	t.Logf("2 processes against in-process ddp: max |Δw| = %g, bit-identical %v", d, same)
	if d > 1e-6 {
		t.Errorf("weights differ by up to %g (tolerance 1e-6)", d)
	}

	mp, ip := readSamples(t, filepath.Join(dir, "mpi.samples")), readSamples(t, filepath.Join(dir, "inproc.samples"))
	if len(mp) != steps {
		t.Fatalf("%d steps logged, want %d", len(mp), steps)
	}
	seen := map[int64]map[int64]bool{} // epoch → indices
	for key, ranks := range mp {
		if len(ranks) != 2 || len(ranks[0]) != 16 || len(ranks[1]) != 16 {
			t.Fatalf("step %s: ranks %v, want 16 samples from each of 2", key, ranks)
		}
		epoch, _ := strconv.ParseInt(strings.Split(key, "/")[0], 10, 64)
		if seen[epoch] == nil {
			seen[epoch] = map[int64]bool{}
		}
		for r, idx := range ranks {
			for _, i := range idx {
				if seen[epoch][i] {
					t.Fatalf("epoch %d: sample %d twice (step %s, rank %d)", epoch, i, key, r)
				}
				seen[epoch][i] = true
			}
			if fmt.Sprint(idx) != fmt.Sprint(ip[key][r]) {
				t.Errorf("step %s rank %d: %v, in-process %v", key, r, idx, ip[key][r])
			}
		}
	}
	for e, s := range seen {
		if len(s) != n {
			t.Errorf("epoch %d covered %d of %d samples", e, len(s), n)
		}
	}

	// Kill rank 1 once it has trained a few steps.
	cmd, out = mpiTrainer(t, mpirun, "killed", args("resume.ckpt", "resume.samples")...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, "resume.samples"))
		if bytes.Count(b, []byte(" rank 1:")) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("rank 1 never trained 3 steps:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	pid := rankPid("killed", 1)
	if pid == 0 {
		t.Fatal("rank 1's process not found")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("mpirun still running 30 s after rank 1 was killed:\n%s", out)
	}
	took := time.Since(killed)
	t.Logf("rank 1 (pid %d) killed; mpirun exited after %v (%v):\n%s", pid, took.Round(time.Millisecond), err, out)
	if err == nil {
		t.Error("mpirun succeeded after a rank was killed")
	}
	want := fmt.Sprintf("trainer: rank 0: stopping: dist: rank 1 (pid %d on ", pid)
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "is gone") {
		t.Errorf("output lacks %q…is gone", want)
	}
	if took > 10*time.Second {
		t.Errorf("the job took %v to end after rank 1 died; want seconds", took)
	}
	ck, err := trainer.ReadCheckpoint(filepath.Join(dir, "resume.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Meta.Steps < 2 || ck.Meta.Steps >= steps {
		t.Fatalf("checkpoint at step %d: want one mid-run", ck.Meta.Steps)
	}
	cmd, out = mpiTrainer(t, mpirun, "resumed", args("resume.ckpt", "resumed.samples")...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("resumed mpirun: %v\n%s", err, out)
	}
	t.Logf("resumed:\n%s", out)
	d, same = maxDiff(t, full, weights(t, filepath.Join(dir, "resume.ckpt")))
	t.Logf("resumed from step %d: max |Δw| = %g against the uninterrupted run, bit-identical %v", ck.Meta.Steps, d, same)
	if !same {
		t.Errorf("the resumed run differs from the uninterrupted one by up to %g", d)
	}
	// The resumed run trains exactly the steps after the checkpoint.
	if got := len(readSamples(t, filepath.Join(dir, "resumed.samples"))); got != steps-int(ck.Meta.Steps) {
		t.Errorf("the resumed run trained %d steps, want %d", got, steps-int(ck.Meta.Steps))
	}
}

// startDaemonN serves n synthetic samples as "train" on a loopback port.
func startDaemonN(t *testing.T, n int64) string {
	addr := clienttest.Start(t, "--workers", "2",
		"--dataset", fmt.Sprintf("train=synthetic:%d", n)).Addr
	return addr
}
