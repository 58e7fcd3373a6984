// Package pil implements torchvision 0.14's photometric and AutoAugment
// pixel operations on uint8 images, given explicit parameters, with the
// arithmetic torchvision performs on PIL images (Pillow 9.4): the same
// float32 blends and truncations, fixed-point luma, float/double HSV
// conversion, 16.16 fixed-point nearest-neighbour affine sampling and
// histogram lookup tables. Every operation except GaussianBlur gives the
// bytes torchvision gives; GaussianBlur, which torchvision computes as a
// float32 tensor convolution, may differ by one level on a rare pixel.
//
// The functions keep no state and allocate nothing: any scratch memory is
// the caller's. They are safe for concurrent use as long as no two calls
// write the same destination. Images are dense HWC bytes with 1 (L) or 3
// (RGB) channels. A call whose images disagree in shape, or whose
// parameters torchvision would reject (a hue factor outside [-0.5, 0.5],
// posterize bits outside [0, 8], a fill of the wrong length, an even
// kernel), panics: that is a bug in the caller, not a property of the
// data.
package pil
