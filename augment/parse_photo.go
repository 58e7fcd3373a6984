package augment

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseOps's readers of the photometric ops (see its grammar).

// parseRange reads LO-HI, where LO may itself be negative (hue's -0.1-0.1)
// and either may have an exponent: the separator is the first '-' that
// leaves two numbers.
func parseRange(s string) ([2]float64, error) {
	for i := 1; i < len(s); i++ {
		if s[i] != '-' || s[i-1] == 'e' || s[i-1] == 'E' {
			continue
		}
		a, err1 := strconv.ParseFloat(s[:i], 64)
		b, err2 := strconv.ParseFloat(s[i+1:], 64)
		if err1 == nil && err2 == nil {
			return [2]float64{a, b}, nil
		}
	}
	return [2]float64{}, fmt.Errorf("bad range %q (want LO-HI)", s)
}

// parseJitterPart reads one part of color_jitter: a number (torchvision's
// single value) or a range. A part that leaves the image unchanged is {0, 0}.
func parseJitterPart(s string, hue bool) ([2]float64, error) {
	var r [2]float64
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if v < 0 {
			return r, fmt.Errorf("bad factor %q (want a number ≥ 0 or LO-HI)", s)
		}
		r = jitterRange(v, hue)
	} else if r, err = parseRange(s); err != nil {
		return r, err
	}
	if !hue && r == [2]float64{1, 1} {
		r = [2]float64{}
	}
	return r, nil
}

func parseColorJitter(arg string) (Op, error) {
	parts := strings.Split(arg, ":")
	if arg == "" || len(parts) > 4 {
		return nil, fmt.Errorf("want color_jitter=B[:C[:S[:H]]], each a number or LO-HI")
	}
	var r [4][2]float64
	for k, s := range parts {
		var err error
		if r[k], err = parseJitterPart(s, k == 3); err != nil {
			return nil, err
		}
	}
	return ColorJitter{Brightness: r[0], Contrast: r[1], Saturation: r[2], Hue: r[3]}, nil
}

func parseGrayscale(arg string, hasArg bool) (Op, error) {
	if !hasArg {
		return Grayscale{Channels: 1}, nil
	}
	c, err := strconv.Atoi(arg)
	if err != nil || (c != 1 && c != 3) {
		return nil, fmt.Errorf("bad channels %q (want 1 or 3)", arg)
	}
	return Grayscale{Channels: c}, nil
}

func parseRandomGrayscale(arg string, hasArg bool) (Op, error) {
	if !hasArg {
		return RandomGrayscale{P: 0.1}, nil
	}
	p, err := strconv.ParseFloat(arg, 64)
	if err != nil {
		return nil, fmt.Errorf("bad probability %q", arg)
	}
	return RandomGrayscale{P: p}, nil
}

func parseBlur(arg string) (Op, error) {
	parts := strings.Split(arg, ":")
	if arg == "" || len(parts) > 2 {
		return nil, fmt.Errorf("want gaussian_blur=K[/KY][:SIGMA or SIGMA_LO-SIGMA_HI]")
	}
	o := GaussianBlur{Sigma: DefaultBlurSigma}
	kx, ky, two := strings.Cut(parts[0], "/")
	var err1, err2 error
	o.Kernel[0], err1 = strconv.Atoi(kx)
	o.Kernel[1] = o.Kernel[0]
	if two {
		o.Kernel[1], err2 = strconv.Atoi(ky)
	}
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("bad kernel size %q", parts[0])
	}
	if len(parts) == 2 {
		if v, err := strconv.ParseFloat(parts[1], 64); err == nil {
			o.Sigma = [2]float64{v, v} // torchvision's fixed sigma
		} else if o.Sigma, err = parseRange(parts[1]); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// parseFillPart reads a fill, V or V/V/V.
func parseFillPart(s string) ([]uint8, error) {
	var fill []uint8
	for _, f := range strings.Split(s, "/") {
		v, err := strconv.ParseUint(f, 10, 8)
		if err != nil {
			return nil, fmt.Errorf("bad fill %q (want 0..255)", f)
		}
		fill = append(fill, uint8(v))
	}
	return fill, nil
}

func parseAutoAugment(arg string, hasArg bool) (Op, error) {
	if !hasArg {
		return AutoAugment{}, nil
	}
	name, fill, hasFill := strings.Cut(arg, ":")
	var o AutoAugment
	switch strings.ToLower(name) {
	case "imagenet":
	case "cifar10":
		o.Policy = PolicyCIFAR10
	case "svhn":
		o.Policy = PolicySVHN
	default:
		return nil, fmt.Errorf("unknown policy %q (want imagenet, cifar10 or svhn)", name)
	}
	if hasFill {
		var err error
		if o.Fill, err = parseFillPart(fill); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// parseInts reads up to len(dst) integers separated by ':' into dst, and
// a fill after them.
func parseInts(arg string, dst []*int, what string) ([]uint8, error) {
	parts := strings.Split(arg, ":")
	if len(parts) > len(dst)+1 {
		return nil, fmt.Errorf("want %s", what)
	}
	for i, s := range parts {
		if i == len(dst) {
			return parseFillPart(s)
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("bad number %q (want %s)", s, what)
		}
		*dst[i] = v
	}
	return nil, nil
}

func parseRandAugment(arg string, hasArg bool) (Op, error) {
	o := RandAugment{N: 2, M: 9, Bins: 31}
	if !hasArg {
		return o, nil
	}
	var err error
	o.Fill, err = parseInts(arg, []*int{&o.N, &o.M, &o.Bins}, "rand_augment=N:M[:BINS[:FILL]]")
	if err == nil && !strings.Contains(arg, ":") {
		err = fmt.Errorf("want rand_augment=N:M[:BINS[:FILL]]")
	}
	return o, err
}

func parseTrivial(arg string, hasArg bool) (Op, error) {
	o := TrivialAugmentWide{Bins: 31}
	if !hasArg {
		return o, nil
	}
	var err error
	o.Fill, err = parseInts(arg, []*int{&o.Bins}, "trivial_augment_wide=BINS[:FILL]")
	return o, err
}
