package dist

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// ErrEnv reports a launcher environment that does not describe a valid rank.
var ErrEnv = errors.New("dist: invalid launcher environment")

// Launcher names.
const (
	MPIRun   = "mpirun"   // Open MPI: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK
	TorchRun = "torchrun" // RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
)

// Launch is what the launcher told this process: its rank of World, its
// rank on this node (which GPU and which local loaderd to use) and, for
// torchrun-style launches, rank 0's rendezvous address.
type Launch struct {
	Launcher  string
	Rank      int
	World     int
	LocalRank int
	// Master is MASTER_ADDR:MASTER_PORT when both are set, else "".
	Master string
}

func (l *Launch) String() string {
	return fmt.Sprintf("rank %d of %d (local rank %d, %s)", l.Rank, l.World, l.LocalRank, l.Launcher)
}

// FromEnv reads the launcher's variables through getenv (os.Getenv). It
// returns nil when no launcher started this process. Open MPI's variables
// win when both sets are present (mpirun -x RANK=… exports torch's too).
func FromEnv(getenv func(string) string) (*Launch, error) {
	if getenv("OMPI_COMM_WORLD_SIZE") != "" || getenv("OMPI_COMM_WORLD_RANK") != "" {
		return parse(getenv, MPIRun, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")
	}
	if getenv("WORLD_SIZE") != "" || getenv("RANK") != "" {
		return parse(getenv, TorchRun, "RANK", "WORLD_SIZE", "LOCAL_RANK")
	}
	return nil, nil
}

func parse(getenv func(string) string, launcher, rankVar, sizeVar, localVar string) (*Launch, error) {
	var errs []error
	num := func(name string, required bool) int {
		s := getenv(name)
		if s == "" {
			if required {
				errs = append(errs, fmt.Errorf("%s is not set", name))
			}
			return 0
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a number ≥ 0", name, s))
		}
		return v
	}
	l := &Launch{Launcher: launcher, Rank: num(rankVar, true), World: num(sizeVar, true), LocalRank: num(localVar, false)}
	if len(errs) == 0 && (l.World < 1 || l.Rank >= l.World) {
		errs = append(errs, fmt.Errorf("%s=%d with %s=%d: want 0 <= rank < world", rankVar, l.Rank, sizeVar, l.World))
	}
	addr, port := getenv("MASTER_ADDR"), getenv("MASTER_PORT")
	switch {
	case addr != "" && port != "":
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("MASTER_PORT=%q: want a port number 1..65535", port))
		}
		l.Master = net.JoinHostPort(addr, port)
	case addr != "" || port != "":
		errs = append(errs, errors.New("MASTER_ADDR and MASTER_PORT must be set together"))
	case launcher == TorchRun && l.World > 1:
		errs = append(errs, errors.New("MASTER_ADDR and MASTER_PORT are not set: rank 0's rendezvous address is needed"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w (%s): %w", ErrEnv, launcher, errors.Join(errs...))
	}
	return l, nil
}
