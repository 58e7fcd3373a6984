package nn

import (
	"math"
	"math/rand/v2"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// Init says how a parameter starts.
type Init uint8

const (
	InitZero Init = iota
	InitOne
	// InitKaiming draws N(0, 2/fan_in) (He et al., ReLU gain), PyTorch's
	// kaiming_normal_(mode="fan_in", nonlinearity="relu").
	InitKaiming
)

// Param is a learnable tensor, or a running statistic when State is set.
// W and G are views into the model's flat buffers, set by NewModel (G is
// invalid for state).
type Param struct {
	Name  string
	Shape []int
	Init  Init
	FanIn int
	State bool
	W, G  tensor.Buffer
}

// Len returns the number of elements.
func (p *Param) Len() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// initValues fills v deterministically from (seed, index).
func (p *Param) initValues(v []float32, seed uint64, index int) {
	switch p.Init {
	case InitZero:
		clear(v)
	case InitOne:
		for i := range v {
			v[i] = 1
		}
	case InitKaiming:
		r := rand.New(rand.NewPCG(seed, uint64(index)+1))
		std := math.Sqrt(2 / float64(max(1, p.FanIn)))
		for i := range v {
			v[i] = float32(r.NormFloat64() * std)
		}
	}
}
