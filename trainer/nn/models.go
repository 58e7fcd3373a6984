package nn

import "fmt"

// CIFAR is the per-sample input shape of the models below.
var CIFAR = Shape{3, 32, 32}

// NewMLP returns Flatten → (Linear → ReLU)×len(hidden) → Linear(classes)
// for input of shape in.
func NewMLP(in Shape, hidden []int, classes int) *Sequential {
	mods := []Module{NewFlatten()}
	f := in.Size()
	for _, h := range hidden {
		mods = append(mods, NewLinear(f, h, true), NewReLU())
		f = h
	}
	return NewSequential(append(mods, NewLinear(f, classes, true))...)
}

// CNNConfig sizes the ResNet-style CNN: a 3×3 conv-BN-ReLU stem of
// Widths[0] channels, then for each stage i Blocks[i] basic residual blocks
// of Widths[i] channels, the first of stages i > 0 with stride 2; then
// global average pooling and a linear classifier.
type CNNConfig struct {
	Widths  []int
	Blocks  []int
	Classes int
}

// DefaultCNN is a ResNet-8-like net (78,042 parameters; 12.5 M
// multiply-adds forward per 32×32 image, about 75 MFLOP per image for
// forward plus backward) sized for CIFAR-10 on a few CPU cores.
var DefaultCNN = CNNConfig{Widths: []int{16, 32, 64}, Blocks: []int{1, 1, 1}, Classes: 10}

// NewCNN builds the network described by cfg for 3-channel input.
func NewCNN(cfg CNNConfig) (*Sequential, error) {
	if len(cfg.Widths) == 0 || len(cfg.Widths) != len(cfg.Blocks) || cfg.Classes <= 0 {
		return nil, fmt.Errorf("nn: cnn config %+v: %w", cfg, ErrShape)
	}
	mods := []Module{NewConv2d(3, cfg.Widths[0], 3, 1, 1, false), NewBatchNorm2d(cfg.Widths[0]), NewReLU()}
	cin := cfg.Widths[0]
	for i, w := range cfg.Widths {
		for j := 0; j < cfg.Blocks[i]; j++ {
			stride := 1
			if i > 0 && j == 0 {
				stride = 2
			}
			mods = append(mods, NewBasicBlock(cin, w, stride))
			cin = w
		}
	}
	mods = append(mods, NewGlobalAvgPool(), NewFlatten(), NewLinear(cin, cfg.Classes, true))
	return NewSequential(mods...), nil
}

// NewBasicBlock is ResNet's basic block: conv3×3(stride)-BN-ReLU-conv3×3-BN
// plus a shortcut (identity, or conv1×1(stride)-BN when the shape changes),
// then ReLU.
func NewBasicBlock(cin, cout, stride int) *Residual {
	main := NewSequential(NewConv2d(cin, cout, 3, stride, 1, false), NewBatchNorm2d(cout), NewReLU(),
		NewConv2d(cout, cout, 3, 1, 1, false), NewBatchNorm2d(cout))
	var sc Module
	if stride != 1 || cin != cout {
		sc = NewSequential(NewConv2d(cin, cout, 1, stride, 0, false), NewBatchNorm2d(cout))
	}
	return NewResidual(main, sc)
}
