package loader

import "github.com/loaderd/loaderd/sampler"

// OpenSampler applies the options sampler= and samples= in query to an
// opened src as Open does, for the external tests' own sources (which
// are no registered formats).
func OpenSampler(src Source, query string) (Source, error) {
	_, o, err := takeSampler("?" + query)
	if err != nil {
		return nil, err
	}
	return withSampler(src, sampler.Uniform, o)
}
