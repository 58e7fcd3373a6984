package loaderdv1_test

import (
	"fmt"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// A client finds a batch's tensor bytes by transport: inline in the message,
// or at an offset of the shared region it mapped from the StreamHeader.
func ExampleBatch() {
	region := make([]byte, 4<<20) // stands in for mmap(StreamHeader.shm.path)
	batches := []*pb.Batch{
		{Seq: 0, Shape: []int64{2, 3, 32, 32}, Tensor: &pb.Batch_Data{Data: make([]byte, 2*3072)}},
		{Seq: 1, Shape: []int64{2, 3, 32, 32}, Tensor: &pb.Batch_Shm{Shm: &pb.ShmRef{Slot: 1, Offset: 1 << 20, Length: 2 * 3072}}},
	}
	for _, b := range batches {
		var tensor []byte
		switch t := b.GetTensor().(type) {
		case *pb.Batch_Data:
			tensor = t.Data
		case *pb.Batch_Shm:
			tensor = region[t.Shm.GetOffset() : t.Shm.GetOffset()+t.Shm.GetLength()]
		}
		fmt.Printf("seq %d: %T, %d bytes, shape %v\n", b.GetSeq(), b.GetTensor(), len(tensor), b.GetShape())
		// ... copy or register tensor, then ack b.GetSeq().
	}
	// Output:
	// seq 0: *loaderdv1.Batch_Data, 6144 bytes, shape [2 3 32 32]
	// seq 1: *loaderdv1.Batch_Shm, 6144 bytes, shape [2 3 32 32]
}

// The zero values of Open's enums and booleans are the common training
// setup: shuffled, padded, inline, output form taken from the augment spec.
func ExampleOpen() {
	open := &pb.Open{Dataset: "cifar10-train", Rank: 1, World: 2, BatchSize: 256, Seed: 42}
	fmt.Println(open.GetNoShuffle(), open.GetDropLast(), open.GetTransport(), open.GetDtype())
	// Output: false false TRANSPORT_UNSPECIFIED DTYPE_UNSPECIFIED
}
