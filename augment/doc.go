// Package augment implements loaderd's per-sample image transforms: a
// chain of declared ops folded once into a Pipeline and run as one fused
// kernel that reads a uint8 image and writes the trainer's tensor.
//
// # Ops
//
// The ops mirror torchvision's classic CIFAR training transform,
// RandomCrop(32, padding=4), RandomHorizontalFlip(), ToTensor(),
// Normalize(mean, std):
//
//   - RandomCrop pads the uint8 image with a fill pixel value and cuts a
//     Size×Size window whose corner is uniform over every valid position.
//   - RandomHorizontalFlip mirrors with probability P.
//   - ToTensor makes float32 x/255 in CHW.
//   - Normalize computes (x − mean)/std per channel.
//   - Output picks the stored dtype (u8, f32, f16, bf16) and layout (CHW,
//     HWC). Values are computed in float32, exactly as torchvision rounds
//     each step, and rounded once to the output dtype (to nearest even for
//     f16 and bf16). U8 output keeps raw pixel values.
//
// Each op declares its effect through OutSpec; NewPipeline folds the chain
// over the input Spec, rejects chains it cannot run (an *OpError naming the
// op) and keeps the result as Out(). CIFARTrain builds the classic chain;
// ParseOps and FormatOps read and write the compact text form used on
// command lines and in the wire protocol, such as
// "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw". NewPipelineAs
// builds a chain with the output dtype and layout a stream asks for.
//
// # Images of any size
//
// The geometric ops follow torchvision's ImageNet transforms on PIL
// images, and must open the chain:
//
//   - Resize scales the shorter side to Size (PIL's bilinear filter with
//     its antialias, as torchvision's Resize).
//   - CenterCrop cuts the central Size×Size window, padding with 0.
//   - RandomResizedCrop draws a box with torchvision's rule and resizes it
//     to Size×Size.
//
// They fold an input Spec of H = W = 0 (any size; U8 HWC) to a fixed
// size; the rest of the chain runs as an ordinary fused pipeline over it.
// DrawSized draws the params for an image's size (Params.Box is the box),
// Scale picks a DCT scale a JPEG may be decoded at, and ApplySized and
// ApplyScaled run both stages with a per-worker Scratch, allocating
// nothing in steady state. The resampler performs Pillow's ImagingResample
// operations exactly; the parity test holds it to torchvision's bytes. On
// amd64 with AVX2 its two passes run in assembly (eight int32 sums per
// instruction, the same integers), held byte for byte to the Go passes.
//
// # Photometric ops
//
// The per-sample augmentations of modern recipes follow torchvision 0.14
// on PIL images, after the crop and flip (or the geometric ops) and
// before totensor, normalize and out:
//
//   - ColorJitter changes brightness, contrast, saturation and hue by
//     factors drawn from ranges, in a random order.
//   - Grayscale converts to grey (1 or 3 channels); RandomGrayscale does
//     so with probability P, keeping the channels.
//   - GaussianBlur blurs with a sigma drawn for both axes.
//   - AutoAugment (ImageNet, CIFAR10, SVHN policies), RandAugment (N, M)
//     and TrivialAugmentWide apply operations of AutoAugment's set with
//     torchvision's magnitude bins (torch.linspace's float32 values,
//     posterize's bit counts), probabilities and random signs.
//
// RandomErasing acts on the finished tensor, after normalize and out, in
// the output's dtype and layout, so it ends the chain. NewPipeline
// rejects other placements with an *OpError naming the op.
//
// A chain with any of them runs in stages (photostage.go): the crop and
// flip through the fused kernel into a uint8 HWC scratch image, each
// photometric op from one scratch image into the other, the value ops
// through their tables into dst, then the erasing. The pixel arithmetic
// is the internal pil package's, which performs Pillow's operations; the
// parity test holds the whole chain to torchvision's tensors bit for bit
// (GaussianBlur, a float32 convolution in torch, to one level on a rare
// pixel). Apply takes its scratch from a pool per pipeline, ApplySized
// and the others from the worker's Scratch: neither allocates in steady
// state. A chain without these ops keeps the single fused kernel.
// values_on_client may split a staged chain (the photometric ops are
// pixels) but not random_erasing, which no uint8 image can express.
//
// # Batch ops
//
// MixUp and CutMix follow torchvision v2 (0.16+): they mix a whole batch
// with itself rolled by one sample (sample i with sample i-1, sample 0
// with the last), with one λ ~ Beta(α, α) per batch; CutMix pastes a box
// of area (1-λ)·H·W, centred at a uniform pixel and clipped to the image,
// and recomputes λ from the clipped box. Each sample's soft label is λ of
// its class and 1-λ of its partner's (sample.Mix.SoftLabels). Declared
// together, each batch takes one of them, CutMix with probability
// CutMix.Switch (0.5 by default), as torchvision's RandomChoice recipe.
//
// They live in the chain's text, "…,out=f32,mixup=0.2,cutmix=1", because
// that text is what a stream names, echoes in its header and replays,
// and what NewPipelineAs, values_on_client and a dataset's default
// augmentation already handle; but they act on batches, which a Pipeline
// never sees. So they must end the chain (after out and random_erasing),
// on a float output, and NewPipeline folds them into a Mixer (OutSpec is
// the identity) that leaves Apply alone: whoever assembles a batch (the
// loader, once its samples are written) calls Mixer.Draw with the batch's
// (seed, epoch, rank, batch index) and Mixer.Apply on the batch in place.
// Apply works in the output's dtype and layout, computing MixUp in float32
// as torch does (x·λ + x_rolled·(1-λ), the factors float32) and rounding
// once; it allocates nothing. λ comes from two Gamma draws (Marsaglia and
// Tsang's method, kept as logarithms so small α never gives 0/0) on the
// counter-based generator below, rounded to float32 as torch's Beta
// samples are.
//
// # Randomness
//
// Params (crop corner, flip, resized-crop box, and the photometric ops'
// draws and erased box in Params.Photo and Params.Erase) are data: Draw
// derives them from (seed, epoch, dataset index), and the box also from
// the image's size, with a counter-based generator (splitmix64 finalisers
// over the key, Lemire's unbiased bounded integers), so any worker, in
// any order, after any restart, draws the same params for a sample. Apply
// reads them and draws nothing: erasing's random values come from a key
// the draw records. Where torchvision draws float32 values (the jitter
// factors, sigma, erasing's area and ratio) the draws round as it does.
//
// # The fused kernel
//
// Apply writes pad, crop, flip, scale, normalisation, layout change and
// dtype conversion in one pass, DALI crop_mirror_normalize style. Every
// value op is per channel and per pixel, so the whole value chain is a
// 256-entry table per channel, built at NewPipeline, holding the output
// element's bits; padding is the fill value through the same table. The
// geometry is a rectangle of in-image segments surrounded by fill runs,
// worked out once per call, and each layout pair (CHW→CHW, HWC→CHW,
// CHW→HWC, HWC→HWC; forwards or mirrored) has its own loop nest. Input is
// read in place in either layout (CIFAR records are CHW, decoders give
// HWC). Multi-byte output is little-endian; dst aligned to the element size
// takes the fast path. Apply allocates nothing. PixelPipeline and
// ValueTable split a pipeline at that table: the geometry alone makes
// uint8 pixels, which the table maps to the full output, byte for byte
// (a stream's values_on_client sends both).
//
// Reference computes the same result by composing one plain function per
// op; the tests hold the kernel to it byte for byte.
//
// # Concurrency
//
// A Pipeline is immutable after NewPipeline: Draw, Apply, Reference and
// the accessors are safe for concurrent use (Apply with distinct dst). Op
// values are plain data; NewPipeline copies their slices.
package augment
