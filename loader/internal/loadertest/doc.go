// Package loadertest implements the helpers the tests of the loader, its
// formats and loader/imagedec share: the fixtures of loader/testdata, the
// real CIFAR-10 JPEGs when present, reading a whole source, the reference
// RGB conversion, the checks of the formats' errors (WantRecordError),
// an allocation count robust to the rest of the process (AllocsPerRun),
// and sources of known capabilities for the tests of wrappers (CapCases,
// CheckWrapped). Only tests import it. Its functions are safe for
// concurrent use, except AllocsPerRun (see there).
package loadertest
