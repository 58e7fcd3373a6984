package augment

// STUB: signatures fixed; the bodies are being written.

// Op is one declared step of a pipeline. OutSpec folds the op's effect on
// the image description; ops never see pixels directly — the pipeline fuses
// them into one kernel.
type Op interface {
	OutSpec(in Spec) (Spec, error)
	String() string
}

// Params are the random choices for one sample: where the crop window
// starts in the padded image, and whether the result is mirrored.
type Params struct {
	Top, Left int32
	Flip      bool
}

// Pipeline is a folded, fused chain of ops. It is immutable after
// NewPipeline and safe for concurrent use.
type Pipeline struct {
	in, out Spec
}

// NewPipeline folds ops over in (a U8 image spec) once.
func NewPipeline(in Spec, ops ...Op) (*Pipeline, error) { panic("stub") }

// In returns the input spec.
func (p *Pipeline) In() Spec { return p.in }

// Out returns the output spec.
func (p *Pipeline) Out() Spec { return p.out }

// Draw returns the random parameters for dataset index `index` of `epoch`.
func (p *Pipeline) Draw(seed uint64, epoch, index int64) Params { panic("stub") }

// Apply runs the fused kernel: src is one input image (In()), dst receives
// Out().Bytes() bytes. It allocates nothing.
func (p *Pipeline) Apply(dst, src []byte, prm Params) error { panic("stub") }
