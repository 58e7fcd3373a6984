package optim

import "math"

// Schedule maps a 0-based step to a learning rate.
type Schedule interface {
	LR(step int) float64
}

// Constant is a fixed learning rate.
type Constant float64

func (c Constant) LR(int) float64 { return float64(c) }

// WarmupCosine rises linearly from Base/Warmup at step 0 to Base at step
// Warmup−1, then follows a half cosine from Base (step Warmup) towards
// Final (reached at step Total; later steps stay at Final).
type WarmupCosine struct {
	Base, Final   float64
	Warmup, Total int
}

func (s WarmupCosine) LR(step int) float64 {
	if step < s.Warmup {
		return s.Base * float64(step+1) / float64(s.Warmup)
	}
	span := s.Total - s.Warmup
	if span <= 0 {
		return s.Final
	}
	p := math.Min(1, float64(step-s.Warmup)/float64(span))
	return s.Final + (s.Base-s.Final)*(1+math.Cos(math.Pi*p))/2
}

// OneCycle is torch.optim.lr_scheduler.OneCycleLR with cosine annealing:
// the rate goes from MaxLR/DivFactor up to MaxLR over the first PctStart of
// Total steps and down to MaxLR/DivFactor/FinalDivFactor at step Total−1,
// while momentum goes the opposite way between MaxMomentum and
// BaseMomentum. ThreePhase gives PyTorch's three_phase=True variant.
type OneCycle struct {
	MaxLR                     float64
	Total                     int
	PctStart                  float64
	DivFactor, FinalDivFactor float64
	BaseMomentum, MaxMomentum float64
	ThreePhase                bool
}

// NewOneCycle returns OneCycleLR with PyTorch's defaults (pct_start 0.3,
// div_factor 25, final_div_factor 1e4, momentum 0.85–0.95).
func NewOneCycle(maxLR float64, total int) OneCycle {
	return OneCycle{MaxLR: maxLR, Total: total, PctStart: 0.3, DivFactor: 25,
		FinalDivFactor: 1e4, BaseMomentum: 0.85, MaxMomentum: 0.95}
}

type phase struct{ end, lr0, lr1, m0, m1 float64 }

func (s OneCycle) phases() []phase {
	lo0 := s.MaxLR / s.DivFactor
	lo1 := lo0 / s.FinalDivFactor
	up := s.PctStart*float64(s.Total) - 1
	last := float64(s.Total - 1)
	if s.ThreePhase {
		return []phase{{up, lo0, s.MaxLR, s.MaxMomentum, s.BaseMomentum},
			{2*s.PctStart*float64(s.Total) - 2, s.MaxLR, lo0, s.BaseMomentum, s.MaxMomentum},
			{last, lo0, lo1, s.MaxMomentum, s.MaxMomentum}}
	}
	return []phase{{up, lo0, s.MaxLR, s.MaxMomentum, s.BaseMomentum},
		{last, s.MaxLR, lo1, s.BaseMomentum, s.MaxMomentum}}
}

func (s OneCycle) at(step int) (lr, mom float64) {
	t := float64(min(max(step, 0), s.Total-1))
	start := 0.0
	ph := s.phases()
	for i, p := range ph {
		if t <= p.end || i == len(ph)-1 {
			pct := 0.0
			if p.end > start {
				pct = (t - start) / (p.end - start)
			}
			return anneal(p.lr0, p.lr1, pct), anneal(p.m0, p.m1, pct)
		}
		start = p.end
	}
	return 0, 0
}

func anneal(a, b, pct float64) float64 { return b + (a-b)/2*(math.Cos(math.Pi*pct)+1) }

// LR returns the learning rate at step (clamped to [0, Total−1]).
func (s OneCycle) LR(step int) float64 { lr, _ := s.at(step); return lr }

// Momentum returns the cycled momentum at step.
func (s OneCycle) Momentum(step int) float64 { _, m := s.at(step); return m }
