package nn

import (
	"fmt"
	"math"
)

// A float64 reference interpreter of module trees: naive loops written
// independently of the kernels (direct convolution, two-pass statistics),
// used as the ground truth for forward values and finite differences.

type ref struct {
	vals  map[*Param][]float64
	train bool
}

func (r *ref) forward(m Module, x []float64, n int, in Shape) ([]float64, Shape) {
	switch l := m.(type) {
	case *Sequential:
		for _, c := range l.Mods {
			x, in = r.forward(c, x, n, in)
		}
		return x, in
	case *Residual:
		a, out := r.forward(l.Main, x, n, in)
		s := x
		if l.Shortcut != nil {
			s, _ = r.forward(l.Shortcut, x, n, in)
		}
		y := make([]float64, len(a))
		for i := range y {
			y[i] = math.Max(a[i]+s[i], 0)
		}
		return y, out
	case *Linear:
		w, b := r.vals[&l.w], r.vals[&l.b]
		y := make([]float64, n*l.Out)
		for i := 0; i < n; i++ {
			for o := 0; o < l.Out; o++ {
				s := 0.0
				if l.hasBias {
					s = b[o]
				}
				for k := 0; k < l.In; k++ {
					s += x[i*l.In+k] * w[o*l.In+k]
				}
				y[i*l.Out+o] = s
			}
		}
		return y, Shape{l.Out, 1, 1}
	case *Conv2d:
		return r.conv(l, x, n, in)
	case *ReLU:
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = math.Max(v, 0)
		}
		return y, in
	case *Flatten:
		return x, Shape{in.Size(), 1, 1}
	case *GlobalAvgPool:
		hw := in.H * in.W
		y := make([]float64, n*in.C)
		for p := range y {
			for i := 0; i < hw; i++ {
				y[p] += x[p*hw+i] / float64(hw)
			}
		}
		return y, Shape{in.C, 1, 1}
	case *MaxPool2d:
		g := l.g
		y := make([]float64, n*in.C*g.OH*g.OW)
		for p := 0; p < n*in.C; p++ {
			for oy := 0; oy < g.OH; oy++ {
				for ox := 0; ox < g.OW; ox++ {
					best := math.Inf(-1)
					for ky := 0; ky < g.K; ky++ {
						for kx := 0; kx < g.K; kx++ {
							best = math.Max(best, x[p*in.H*in.W+(oy*g.Stride+ky)*in.W+ox*g.Stride+kx])
						}
					}
					y[(p*g.OH+oy)*g.OW+ox] = best
				}
			}
		}
		return y, Shape{in.C, g.OH, g.OW}
	case *BatchNorm2d:
		return r.bn(l, x, n, in), in
	}
	panic(fmt.Sprintf("ref: no reference for %T", m))
}

func (r *ref) conv(l *Conv2d, x []float64, n int, in Shape) ([]float64, Shape) {
	g, w, b := l.g, r.vals[&l.w], r.vals[&l.b]
	y := make([]float64, n*l.Cout*g.OH*g.OW)
	for i := 0; i < n; i++ {
		for co := 0; co < l.Cout; co++ {
			for oy := 0; oy < g.OH; oy++ {
				for ox := 0; ox < g.OW; ox++ {
					s := 0.0
					if l.hasBias {
						s = b[co]
					}
					for ci := 0; ci < l.Cin; ci++ {
						for ky := 0; ky < l.K; ky++ {
							for kx := 0; kx < l.K; kx++ {
								iy, ix := oy*l.Stride-l.Pad+ky, ox*l.Stride-l.Pad+kx
								if iy < 0 || ix < 0 || iy >= in.H || ix >= in.W {
									continue
								}
								s += w[((co*l.Cin+ci)*l.K+ky)*l.K+kx] * x[((i*in.C+ci)*in.H+iy)*in.W+ix]
							}
						}
					}
					y[((i*l.Cout+co)*g.OH+oy)*g.OW+ox] = s
				}
			}
		}
	}
	return y, Shape{l.Cout, g.OH, g.OW}
}

func (r *ref) bn(l *BatchNorm2d, x []float64, n int, in Shape) []float64 {
	hw := in.H * in.W
	gm, bt := r.vals[&l.gamma], r.vals[&l.beta]
	y := make([]float64, len(x))
	for c := 0; c < in.C; c++ {
		var mean, v float64
		if r.train {
			for i := 0; i < n; i++ {
				for k := 0; k < hw; k++ {
					mean += x[(i*in.C+c)*hw+k]
				}
			}
			mean /= float64(n * hw)
			for i := 0; i < n; i++ {
				for k := 0; k < hw; k++ {
					e := x[(i*in.C+c)*hw+k] - mean
					v += e * e
				}
			}
			v /= float64(n * hw)
		} else {
			mean, v = r.vals[&l.rmean][c], r.vals[&l.rvar][c]
		}
		is := 1 / math.Sqrt(v+float64(l.Eps))
		for i := 0; i < n; i++ {
			for k := 0; k < hw; k++ {
				j := (i*in.C+c)*hw + k
				y[j] = gm[c]*(x[j]-mean)*is + bt[c]
			}
		}
	}
	return y
}

// refCE is the smoothed cross-entropy mean over rows, in float64.
func refCE(logits []float64, labels []int32, n, c int, eps float64) float64 {
	total := 0.0
	for i := 0; i < n; i++ {
		row := logits[i*c : i*c+c]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(v - m)
		}
		for j, v := range row {
			q := eps / float64(c)
			if int32(j) == labels[i] {
				q += 1 - eps
			}
			total -= q * (v - m - math.Log(s))
		}
	}
	return total / float64(n)
}
