package loader

import (
	"strings"
	"testing"
)

// TestTenantTurns holds the workers' turns to tenants first: a tenant
// with three streams and one with one stream get alternate turns, and a
// stream leaving keeps the others' order.
func TestTenantTurns(t *testing.T) {
	p := &Pool{byTenant: map[any]*tenant{}}
	name := map[*Loader]string{}
	mk := func(n string, key any) *Loader {
		l := &Loader{cfg: Config{Tenant: key}}
		name[l] = n
		return l
	}
	a1, a2, a3 := mk("a1", "A"), mk("a2", "A"), mk("a3", "A")
	b1 := mk("b1", "B")
	c1 := mk("c1", nil) // no tenant: one of its own
	for _, l := range []*Loader{a1, a2, a3, b1} {
		p.activateLocked(l)
	}
	p.activateLocked(a1) // already queued: no second turn
	turns := func(n int) string {
		var s []string
		for range n {
			l, ok := p.nextLocked()
			if !ok {
				s = append(s, "-")
				continue
			}
			s = append(s, name[l])
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		do   func()
		n    int
		want string
	}{
		{nil, 6, "a1 b1 a2 b1 a3 b1"},
		{func() { p.deactivateLocked(a2) }, 4, "a1 b1 a3 b1"},
		{func() { p.activateLocked(c1) }, 6, "c1 a1 b1 c1 a3 b1"}, // a new tenant takes the next turn
		{func() { p.deactivateLocked(b1) }, 4, "c1 a1 c1 a3"},
		{func() { p.deactivateLocked(a1); p.deactivateLocked(a3); p.deactivateLocked(c1) }, 2, "- -"},
	} {
		if c.do != nil {
			c.do()
		}
		if got := turns(c.n); got != c.want {
			t.Fatalf("turns %q, want %q", got, c.want)
		}
	}
	if len(p.byTenant) != 0 || len(p.tenants) != 0 {
		t.Fatalf("tenants left: %d, %d", len(p.byTenant), len(p.tenants))
	}
}

type demotable struct{ down *bool }

func (d demotable) Demoted() bool { return *d.down }

// TestTenantDemoted: a demoted tenant gets turns only while no other
// tenant has work, and its own turns again once it is restored.
func TestTenantDemoted(t *testing.T) {
	p := &Pool{byTenant: map[any]*tenant{}}
	down := true
	flood := demotable{&down}
	f1, f2 := &Loader{cfg: Config{Tenant: flood}}, &Loader{cfg: Config{Tenant: flood}}
	n1 := &Loader{cfg: Config{Tenant: "normal"}}
	name := map[*Loader]string{f1: "f1", f2: "f2", n1: "n1"}
	p.activateLocked(f1)
	p.activateLocked(f2)
	next := func() string {
		l, ok := p.nextLocked()
		if !ok {
			return "-"
		}
		return name[l]
	}
	var got []string
	for range 2 { // alone, the demoted tenant is served
		got = append(got, next())
	}
	p.activateLocked(n1)
	for range 3 { // with another tenant at work, only that one
		got = append(got, next())
	}
	down = false
	for range 4 {
		got = append(got, next())
	}
	if s := strings.Join(got, " "); s != "f1 f2 n1 n1 n1 f1 n1 f2 n1" {
		t.Fatalf("turns %q", s)
	}
}
