package server

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// Messages out of place are named for what they are (issue 29, case 8):
// an empty request first or later, an Ack or a Want first, a second Open.
func TestMisplacedMessages(t *testing.T) {
	_, api, _ := serve(t, Options{}, testDataset("good", testSource{n: 64}))
	open := &pb.Open{Dataset: "good", BatchSize: 4, MaxInFlight: 2}
	for _, tc := range []struct {
		name      string
		afterOpen bool
		msg       *pb.StreamRequest
		want      string
	}{
		{"empty first", false, &pb.StreamRequest{}, "first message of a stream must be Open, got an empty message"},
		{"ack first", false, &pb.StreamRequest{Msg: &pb.StreamRequest_Ack{Ack: &pb.Ack{}}}, "must be Open, got an Ack"},
		{"want first", false, &pb.StreamRequest{Msg: &pb.StreamRequest_Want{Want: &pb.Want{}}}, "must be Open, got a Want"},
		{"empty later", true, &pb.StreamRequest{}, "an empty message on a stream"},
		{"open later", true, &pb.StreamRequest{Msg: &pb.StreamRequest_Open{Open: open}}, "a second Open on a stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var st pb.Loader_StreamClient
			var err error
			if tc.afterOpen {
				st, err = openRaw(ctx, api, open)
			} else {
				st, err = api.Stream(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Send(tc.msg); err != nil {
				t.Fatal(err)
			}
			for err == nil {
				_, err = st.Recv()
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want INVALID_ARGUMENT containing %q", err, tc.want)
			}
		})
	}
}
