package wire

import "google.golang.org/protobuf/encoding/protowire"

// Field numbers of the messages the hand-written codecs read and write.
// They must equal proto/loaderd/v1/loader.proto's; TestFieldNumbers holds
// every constant to the generated descriptors, and fails when a field is
// added to one of these messages without a constant here.
const (
	ReplyHeader protowire.Number = 1 // StreamReply.header
	ReplyBatch  protowire.Number = 2 // StreamReply.batch

	BatchSeq          protowire.Number = 1  // Batch.seq
	BatchEpoch        protowire.Number = 2  // Batch.epoch
	BatchIndex        protowire.Number = 3  // Batch.batch_index
	BatchIndices      protowire.Number = 4  // Batch.indices
	BatchLabels       protowire.Number = 5  // Batch.labels
	BatchDType        protowire.Number = 6  // Batch.dtype
	BatchLayout       protowire.Number = 7  // Batch.layout
	BatchShape        protowire.Number = 8  // Batch.shape
	BatchData         protowire.Number = 9  // Batch.data (inline tensor)
	BatchShm          protowire.Number = 10 // Batch.shm
	BatchParams       protowire.Number = 11 // Batch.params
	BatchMix          protowire.Number = 12 // Batch.mix
	BatchFieldData    protowire.Number = 13 // Batch.field_data
	BatchFieldEnds    protowire.Number = 14 // Batch.field_ends
	BatchFieldPresent protowire.Number = 15 // Batch.field_present
	BatchLabelSets    protowire.Number = 16 // Batch.label_sets
	BatchLabelSetEnds protowire.Number = 17 // Batch.label_set_ends
	ShmSlot           protowire.Number = 1  // ShmRef.slot
	ShmGeneration     protowire.Number = 2  // ShmRef.generation
	ShmOffset         protowire.Number = 3  // ShmRef.offset
	ShmLength         protowire.Number = 4  // ShmRef.length
	ParamsTop         protowire.Number = 1  // AugmentParams.top
	ParamsLeft        protowire.Number = 2  // AugmentParams.left
	ParamsFlip        protowire.Number = 3  // AugmentParams.flip
	ParamsHeight      protowire.Number = 4  // AugmentParams.height
	ParamsWidth       protowire.Number = 5  // AugmentParams.width

	ParamsJitterOrder protowire.Number = 6  // AugmentParams.jitter_order
	ParamsJitter      protowire.Number = 7  // AugmentParams.jitter
	ParamsGray        protowire.Number = 8  // AugmentParams.gray
	ParamsSigma       protowire.Number = 9  // AugmentParams.sigma
	ParamsNumOps      protowire.Number = 10 // AugmentParams.num_ops
	ParamsOp          protowire.Number = 11 // AugmentParams.op
	ParamsMagnitude   protowire.Number = 12 // AugmentParams.magnitude
	ParamsErased      protowire.Number = 13 // AugmentParams.erased
	ParamsEraseTop    protowire.Number = 14 // AugmentParams.erase_top
	ParamsEraseLeft   protowire.Number = 15 // AugmentParams.erase_left
	ParamsEraseHeight protowire.Number = 16 // AugmentParams.erase_height
	ParamsEraseWidth  protowire.Number = 17 // AugmentParams.erase_width
	ParamsEraseNoise  protowire.Number = 18 // AugmentParams.erase_noise

	MixKind      protowire.Number = 1 // MixRecord.kind
	MixLam       protowire.Number = 2 // MixRecord.lam
	MixBoxTop    protowire.Number = 3 // MixRecord.box_top
	MixBoxLeft   protowire.Number = 4 // MixRecord.box_left
	MixBoxHeight protowire.Number = 5 // MixRecord.box_height
	MixBoxWidth  protowire.Number = 6 // MixRecord.box_width
)
