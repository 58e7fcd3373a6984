// Package loadertest implements the helpers the tests of the loader, its
// formats and loader/imagedec share: the fixtures of loader/testdata, the
// real CIFAR-10 JPEGs when present, reading a whole source, the reference
// RGB conversion, and the checks of the formats' errors. Only tests import
// it. Its functions are safe for concurrent use.
package loadertest
