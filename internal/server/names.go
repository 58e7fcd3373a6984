package server

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client/wire"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// maxSampleNames bounds one SampleNames call (see loader.proto).
const maxSampleNames = 10000

// sampleNamer is the optional interface of a loader.Source that knows each
// sample's file or archive member name. Asserted here on an anonymous
// method set, so it holds whichever package declares it.
type sampleNamer interface{ Name(i int64) string }

// SampleNames answers the names of consecutive dataset indices: the
// source's own where it has them, else each index in decimal.
func (s *Server) SampleNames(_ context.Context, req *pb.SampleNamesRequest) (*pb.SampleNamesResponse, error) {
	select {
	case <-s.stopping:
		return nil, status.Error(codes.Unavailable, errStopping.Error())
	default:
	}
	if n := len(req.GetDataset()); n > wire.MaxNameLen {
		return nil, status.Errorf(codes.InvalidArgument, "loaderd: SampleNames: dataset of %d bytes, over the %d-byte limit", n, wire.MaxNameLen)
	}
	d, ok := s.datasets[req.GetDataset()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "loaderd: unknown dataset %q (registered: %s)",
			req.GetDataset(), strings.Join(s.names(), ", "))
	}
	size := d.Source.Len()
	start, count := req.GetStart(), req.GetCount()
	var bad []string
	if start < 0 || start > size {
		bad = append(bad, "start "+strconv.FormatInt(start, 10)+" outside 0.."+strconv.FormatInt(size, 10))
	}
	if count < 1 || count > maxSampleNames {
		bad = append(bad, "count "+strconv.Itoa(int(count))+" outside 1.."+strconv.Itoa(maxSampleNames))
	}
	if len(bad) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "loaderd: SampleNames of %q: %s", d.Name, strings.Join(bad, "; "))
	}
	end := min(start+int64(count), size)
	namer, named := d.Source.(sampleNamer)
	// The page counts in the memory budget while it is built, a chunk at a
	// time: many walkers of a dataset with long names add up.
	var held, pending int64
	defer func() { s.mem.release(memNames, held) }()
	take := func(n int64) error {
		if pending += n; pending < namesChunk {
			return nil
		}
		if err := s.mem.reserve(memNames, pending); err != nil {
			return status.Errorf(codes.ResourceExhausted, "loaderd: SampleNames of %q: a page of %d names: %v (--memory-limit)", d.Name, end-start, err)
		}
		held, pending = held+pending, 0
		return nil
	}
	if err := take(int64(end-start) * nameOverhead); err != nil {
		return nil, err
	}
	resp := &pb.SampleNamesResponse{Start: start, Named: named, Size: size, Names: make([]string, 0, end-start)}
	for i := start; i < end; i++ {
		name := ""
		if named {
			name = namer.Name(i)
		}
		if name == "" {
			name = strconv.FormatInt(i, 10)
		}
		if err := take(int64(len(name))); err != nil {
			return nil, err
		}
		resp.Names = append(resp.Names, name)
	}
	return resp, nil
}

// A name's share of a SampleNames page beside its bytes (its string
// header, and its tag and length on the wire), and the chunk in which a
// page's memory is taken from the budget.
const (
	nameOverhead = 24
	namesChunk   = 64 << 10
)
