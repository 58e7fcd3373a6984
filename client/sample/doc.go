// Package sample describes one sample of a loaderd batch as it crosses the
// wire: the element type and axis order of its pixels (DType, Layout), the
// random choices the daemon's augmentation drew for it (Params, Box), and
// the half-precision conversions a trainer applies to f32 pixels (Float16,
// BFloat16).
//
// It is a leaf: the daemon's augment package, the client and the trainer
// all import it, and it imports only the standard library, so a program
// that links the client gets these few types without the daemon. Its
// values are plain data and its functions are pure, safe for concurrent
// use.
package sample
