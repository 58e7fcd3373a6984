// Package synthetic implements the built-in synthetic dataset, registered
// as the loader format
//
//	synthetic[:N]   N samples (default 50,000, CIFAR-10's training split)
//
// and returned by New: CIFAR-shaped (32×32×3 U8 HWC, 10 classes), with
// class-dependent colour and stripes a model can learn, and sample i a
// pure function of (seed, i). It needs no files, which makes it the
// daemon's default dataset and the one tests and benchmarks use.
//
// Import it for its side effect to make the format known to loader.Open,
// or call New. Its sources are safe for concurrent use.
package synthetic
