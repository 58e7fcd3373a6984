package sample_test

import (
	"testing"

	"github.com/loaderd/loaderd/client/sample"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// TestEnumsMirrorWire holds loader.proto's promise that both ends convert
// the wire's DType and Layout to this package's with a plain cast.
func TestEnumsMirrorWire(t *testing.T) {
	dtypes := []struct {
		wire pb.DType
		want sample.DType
	}{
		{pb.DType_DTYPE_U8, sample.U8},
		{pb.DType_DTYPE_F32, sample.F32},
		{pb.DType_DTYPE_F16, sample.F16},
		{pb.DType_DTYPE_BF16, sample.BF16},
	}
	for _, tt := range dtypes {
		if sample.DType(tt.wire) != tt.want {
			t.Errorf("%v = %d, sample.%v = %d", tt.wire, tt.wire, tt.want, tt.want)
		}
	}
	layouts := []struct {
		wire pb.Layout
		want sample.Layout
	}{
		{pb.Layout_LAYOUT_HWC, sample.HWC},
		{pb.Layout_LAYOUT_CHW, sample.CHW},
	}
	for _, tt := range layouts {
		if sample.Layout(tt.wire) != tt.want {
			t.Errorf("%v = %d, sample.%v = %d", tt.wire, tt.wire, tt.want, tt.want)
		}
	}
}
