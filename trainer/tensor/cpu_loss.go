package tensor

import "math"

func (d *CPU) labelsOK(op string, lab []int32, c int) bool {
	for i, l := range lab {
		if l < 0 || int(l) >= c {
			d.fail(argErr(op, "label[%d] = %d outside [0, %d)", i, l, c))
			return false
		}
	}
	return true
}

// SoftmaxCE computes softmax rows into prob and smoothed cross-entropy per
// row into loss: −Σ_j q_j·log p_j with q = (1−eps)·onehot + eps/c.
func (d *CPU) SoftmaxCE(loss, prob, logits, labels Buffer, n, c int, eps float32) {
	if !d.dims("softmax_ce", n, c, 1) {
		return
	}
	a := &d.a
	a.x = d.fv("softmax_ce", logits, n*c)
	a.y = d.fv("softmax_ce", prob, n*c)
	a.z = d.fv("softmax_ce", loss, n)
	a.lab = d.iv("softmax_ce", labels, n)
	if a.x == nil || a.y == nil || a.z == nil || a.lab == nil || c <= 0 ||
		!d.labelsOK("softmax_ce", a.lab, c) {
		return
	}
	a.c, a.a = c, eps
	d.par(n, grainRows(c), d.fnCE)
}

func (d *CPU) ceRange(_, lo, hi int) {
	a := &d.a
	c, eps := a.c, float64(a.a)
	for r := lo; r < hi; r++ {
		x, p := a.x[r*c:r*c+c], a.y[r*c:r*c+c]
		m := x[0]
		for _, v := range x {
			m = max(m, v)
		}
		var s, sumLog float64
		for j, v := range x {
			e := math.Exp(float64(v - m))
			p[j] = float32(e)
			s += e
		}
		ls := math.Log(s)
		for j, v := range x {
			p[j] = float32(float64(p[j]) / s)
			sumLog += float64(v-m) - ls
		}
		ly := float64(x[a.lab[r]]-m) - ls
		a.z[r] = float32(-(1-eps)*ly - eps/float64(c)*sumLog)
	}
}

// SoftmaxCEBackward sets dlogits = scale·(prob − q).
func (d *CPU) SoftmaxCEBackward(dlogits, prob, labels Buffer, n, c int, eps, scale float32) {
	if !d.dims("softmax_ce_backward", n, c, 1) {
		return
	}
	a := &d.a
	a.y = d.fv("softmax_ce_backward", prob, n*c)
	a.z = d.fv("softmax_ce_backward", dlogits, n*c)
	a.lab = d.iv("softmax_ce_backward", labels, n)
	if a.y == nil || a.z == nil || a.lab == nil || c <= 0 ||
		!d.labelsOK("softmax_ce_backward", a.lab, c) {
		return
	}
	a.c, a.a, a.b = c, eps, scale
	d.par(n, grainRows(c), d.fnCEB)
}

func (d *CPU) ceBackRange(_, lo, hi int) {
	a := &d.a
	c := a.c
	off := a.a / float32(c)
	for r := lo; r < hi; r++ {
		p, g := a.y[r*c:r*c+c], a.z[r*c:r*c+c]
		for j, v := range p {
			g[j] = a.b * (v - off)
		}
		y := a.lab[r]
		g[y] -= a.b * (1 - a.a)
	}
}

// CountCorrect sets dst[0] to the number of rows whose first arg-max is the label.
func (d *CPU) CountCorrect(dst, logits, labels Buffer, n, c int) {
	if !d.dims("count_correct", n, c, 1) {
		return
	}
	x := d.fv("count_correct", logits, n*c)
	z := d.fv("count_correct", dst, 1)
	lab := d.iv("count_correct", labels, n)
	if x == nil || z == nil || lab == nil || c <= 0 {
		return
	}
	k := 0
	for r := 0; r < n; r++ {
		row := x[r*c : r*c+c]
		bi := 0
		for j, v := range row {
			if v > row[bi] {
				bi = j
			}
		}
		if int32(bi) == lab[r] {
			k++
		}
	}
	z[0] = float32(k)
}

// SGD applies torch.optim.SGD's update element-wise.
func (d *CPU) SGD(p, g, buf Buffer, s SGDArgs) {
	a := &d.a
	a.x = d.fvAny("sgd", p)
	a.y = d.fv("sgd", g, len(a.x))
	a.z = nil
	if s.Momentum != 0 {
		if a.z = d.fv("sgd", buf, len(a.x)); a.z == nil {
			return
		}
	}
	if a.x == nil || a.y == nil {
		return
	}
	a.sgd = s
	d.par(len(a.x), elemGrain, d.fnSGD)
}

func (d *CPU) sgdRange(_, lo, hi int) {
	a := &d.a
	s := a.sgd
	p, g := a.x[lo:hi], a.y[lo:hi]
	var buf []float32
	if s.Momentum != 0 {
		buf = a.z[lo:hi]
	}
	for i := range p {
		dp := g[i]
		if s.WeightDecay != 0 {
			dp += s.WeightDecay * p[i]
		}
		if buf != nil {
			if s.First {
				buf[i] = dp
			} else {
				buf[i] = s.Momentum*buf[i] + (1-s.Dampening)*dp
			}
			if s.Nesterov {
				dp += s.Momentum * buf[i]
			} else {
				dp = buf[i]
			}
		}
		p[i] -= s.LR * dp
	}
}
