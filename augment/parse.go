package augment

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/client/sample"
)

// ParseOps reads the compact text form of a chain of ops, used on command
// lines and in the wire protocol:
//
//	ops       = [ op { "," op } ]
//	op        = "crop=" SIZE [ ":" PADDING [ ":" FILL ] ]   RandomCrop; FILL is V or V/V/V (0..255)
//	          | "resize=" SIZE                              Resize (shorter side)
//	          | "center_crop=" SIZE                         CenterCrop
//	          | "random_resized_crop=" SIZE [ ":" RANGE [ ":" RANGE ] ]
//	                                                        RandomResizedCrop; scale, then ratio
//	          | "flip" [ "=" P ]                            RandomHorizontalFlip, P defaults to 0.5
//	          | "color_jitter=" JIT [ ":" JIT [ ":" JIT [ ":" JIT ] ] ]
//	                                                        ColorJitter: brightness, contrast,
//	                                                        saturation, hue; 0 is off
//	          | "grayscale" [ "=" ( "1" | "3" ) ]           Grayscale, 1 channel by default
//	          | "random_grayscale" [ "=" P ]                RandomGrayscale, P defaults to 0.1
//	          | "gaussian_blur=" K [ "/" KY ] [ ":" SIGMA ] GaussianBlur; SIGMA is S or RANGE
//	                                                        (default 0.1-2)
//	          | "auto_augment" [ "=" POLICY [ ":" FILL ] ]  AutoAugment, imagenet by default
//	          | "rand_augment" [ "=" N ":" M [ ":" BINS [ ":" FILL ] ] ]
//	                                                        RandAugment, 2:9:31 by default
//	          | "trivial_augment_wide" [ "=" BINS [ ":" FILL ] ]
//	                                                        TrivialAugmentWide, 31 bins by default
//	          | "totensor"                                  ToTensor
//	          | "normalize=" STATS                          Normalize
//	          | "out=" PART [ ":" PART ]                    Output; a PART is a dtype or a layout
//	          | "random_erasing" [ "=" P [ ":" RANGE [ ":" RANGE [ ":" VALUE ] ] ] ]
//	                                                        RandomErasing: p, scale, ratio;
//	                                                        0.5:0.02-0.33:0.3-3.3:0 by default
//	          | "mixup=" ALPHA                              MixUp, a batch op
//	          | "cutmix=" ALPHA [ ":" SWITCH ]              CutMix, a batch op; with a mixup, a
//	                                                        batch takes cutmix with probability
//	                                                        SWITCH (default 0.5), else mixup
//	STATS     = "cifar10" | "imagenet" | M{/M} ":" S{/S}    one value, or one per channel
//	RANGE     = LO "-" HI
//	JIT       = F | RANGE                                   torchvision's number or (min, max)
//	POLICY    = "imagenet" | "cifar10" | "svhn"
//	VALUE     = V{/V} | "random"                            one value, one per channel, or noise
//
// Names are case-insensitive and blanks around items are ignored; the empty
// string is the empty chain. As in torchvision recipes, where ToTensor and
// Normalize always go together, a normalize on a still-u8 chain implies a
// totensor before it; FormatOps writes that shorthand back, so
// ParseOps(FormatOps(ops)) returns ops. CIFARTrain(F32, CHW) is
// "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw".
//
// ParseOps checks syntax only; NewPipeline checks that the chain fits an
// image. Errors match ErrSyntax.
func ParseOps(s string) ([]Op, error) {
	var ops []Op
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	isFloat := false
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, arg, hasArg := strings.Cut(item, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		arg = strings.TrimSpace(arg)
		if hasArg && arg == "" {
			return nil, syntaxError(item, "missing value after '='")
		}
		var op Op
		var err error
		switch name {
		case "crop":
			op, err = parseCrop(arg)
		case "resize", "center_crop", "random_resized_crop":
			op, err = parseGeo(name, arg)
		case "flip":
			op, err = parseFlip(arg, hasArg)
		case "color_jitter":
			op, err = parseColorJitter(arg)
		case "grayscale":
			op, err = parseGrayscale(arg, hasArg)
		case "random_grayscale":
			op, err = parseRandomGrayscale(arg, hasArg)
		case "gaussian_blur":
			op, err = parseBlur(arg)
		case "auto_augment":
			op, err = parseAutoAugment(arg, hasArg)
		case "rand_augment":
			op, err = parseRandAugment(arg, hasArg)
		case "trivial_augment_wide":
			op, err = parseTrivial(arg, hasArg)
		case "random_erasing":
			op, err = parseErase(arg, hasArg)
		case "mixup", "cutmix":
			op, err = parseMix(name, arg)
		case "totensor":
			if hasArg {
				return nil, syntaxError(item, "totensor takes no value")
			}
			op, isFloat = ToTensor{}, true
		case "normalize":
			op, err = parseNormalize(arg)
			if err == nil && !isFloat {
				ops, isFloat = append(ops, ToTensor{}), true
			}
		case "out":
			var o Output
			o, err = parseOutput(arg)
			if o.DType != 0 {
				isFloat = o.DType.IsFloat()
			}
			op = o
		case "":
			return nil, syntaxError(item, "empty op")
		default:
			return nil, syntaxError(item, "unknown op (want resize, center_crop, random_resized_crop, crop, flip, color_jitter, grayscale, random_grayscale, gaussian_blur, auto_augment, rand_augment, trivial_augment_wide, totensor, normalize, out, random_erasing, mixup or cutmix)")
		}
		if err != nil {
			return nil, syntaxError(item, err.Error())
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func syntaxError(item, reason string) error {
	return errorf(ErrSyntax, "augment: parse %q: %s", item, reason)
}

func parseCrop(arg string) (Op, error) {
	parts := strings.Split(arg, ":")
	if arg == "" || len(parts) > 3 {
		return nil, fmt.Errorf("want crop=SIZE[:PADDING[:FILL]]")
	}
	var o RandomCrop
	var err error
	if o.Size, err = strconv.Atoi(parts[0]); err != nil {
		return nil, fmt.Errorf("bad size %q", parts[0])
	}
	if len(parts) > 1 {
		if o.Padding, err = strconv.Atoi(parts[1]); err != nil {
			return nil, fmt.Errorf("bad padding %q", parts[1])
		}
	}
	if len(parts) > 2 {
		for _, f := range strings.Split(parts[2], "/") {
			v, err := strconv.ParseUint(f, 10, 8)
			if err != nil {
				return nil, fmt.Errorf("bad fill %q (want 0..255)", f)
			}
			o.Fill = append(o.Fill, uint8(v))
		}
	}
	return o, nil
}

func parseGeo(name, arg string) (Op, error) {
	parts := strings.Split(arg, ":")
	size, err := strconv.Atoi(parts[0])
	if err != nil {
		return nil, fmt.Errorf("bad size %q", parts[0])
	}
	switch name {
	case "resize", "center_crop":
		if len(parts) > 1 {
			return nil, fmt.Errorf("want %s=SIZE", name)
		}
		if name == "resize" {
			return Resize{Size: size}, nil
		}
		return CenterCrop{Size: size}, nil
	}
	if len(parts) > 3 {
		return nil, fmt.Errorf("want random_resized_crop=SIZE[:SCALE_LO-SCALE_HI[:RATIO_LO-RATIO_HI]]")
	}
	o := RandomResizedCrop{Size: size, Scale: DefaultRRCScale, Ratio: DefaultRRCRatio}
	for i, r := range parts[1:] {
		lo, hi, ok := strings.Cut(r, "-")
		a, err1 := strconv.ParseFloat(lo, 64)
		b, err2 := strconv.ParseFloat(hi, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad range %q (want LO-HI)", r)
		}
		if i == 0 {
			o.Scale = [2]float64{a, b}
		} else {
			o.Ratio = [2]float64{a, b}
		}
	}
	return o, nil
}

func parseFlip(arg string, hasArg bool) (Op, error) {
	if !hasArg {
		return RandomHorizontalFlip{P: 0.5}, nil
	}
	p, err := strconv.ParseFloat(arg, 64)
	if err != nil {
		return nil, fmt.Errorf("bad probability %q", arg)
	}
	return RandomHorizontalFlip{P: p}, nil
}

func parseNormalize(arg string) (Op, error) {
	switch strings.ToLower(arg) {
	case "cifar10":
		return Normalize{Mean: CIFAR10Mean, Std: CIFAR10Std}, nil
	case "imagenet":
		return Normalize{Mean: ImageNetMean, Std: ImageNetStd}, nil
	}
	m, s, ok := strings.Cut(arg, ":")
	if !ok {
		return nil, fmt.Errorf("want normalize=cifar10, imagenet or MEAN[/MEAN/MEAN]:STD[/STD/STD]")
	}
	mean, err := parseFloats(m)
	if err != nil {
		return nil, err
	}
	std, err := parseFloats(s)
	if err != nil {
		return nil, err
	}
	return Normalize{Mean: mean, Std: std}, nil
}

func parseFloats(s string) ([]float32, error) {
	var v []float32
	for _, f := range strings.Split(s, "/") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", f)
		}
		v = append(v, float32(x))
	}
	return v, nil
}

func parseOutput(arg string) (Output, error) {
	var o Output
	parts := strings.Split(arg, ":")
	if len(parts) > 2 {
		return o, fmt.Errorf("want out=DTYPE[:LAYOUT]")
	}
	for _, p := range parts {
		if d, err := sample.ParseDType(p); err == nil && o.DType == 0 {
			o.DType = d
		} else if l, err := sample.ParseLayout(p); err == nil && o.Layout == 0 {
			o.Layout = l
		} else {
			return o, fmt.Errorf("bad or repeated dtype/layout %q", p)
		}
	}
	return o, nil
}

// FormatOps writes ops in ParseOps form, joining each op's String with
// commas; a ToTensor directly before a Normalize on a u8 chain is left
// implicit.
func FormatOps(ops []Op) string {
	var parts []string
	isFloat := false
	for i, op := range ops {
		switch o := op.(type) {
		case ToTensor:
			if _, next := nextOp(ops, i+1).(Normalize); next && !isFloat {
				isFloat = true
				continue
			}
			isFloat = true
		case Output:
			if o.DType != 0 {
				isFloat = o.DType.IsFloat()
			}
		case nil:
			parts = append(parts, "<nil>")
			continue
		}
		parts = append(parts, op.String())
	}
	return strings.Join(parts, ",")
}

func nextOp(ops []Op, i int) Op {
	if i < len(ops) {
		return ops[i]
	}
	return nil
}
