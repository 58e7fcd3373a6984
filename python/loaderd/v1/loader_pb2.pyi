from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
DTYPE_BF16: DType
DTYPE_F16: DType
DTYPE_F32: DType
DTYPE_U8: DType
DTYPE_UNSPECIFIED: DType
LAYOUT_CHW: Layout
LAYOUT_HWC: Layout
LAYOUT_UNSPECIFIED: Layout
MIX_KIND_CUTMIX: MixKind
MIX_KIND_MIXUP: MixKind
MIX_KIND_UNSPECIFIED: MixKind
TRANSPORT_INLINE: Transport
TRANSPORT_SHM: Transport
TRANSPORT_UNSPECIFIED: Transport

class Ack(_message.Message):
    __slots__ = ["seqs", "wait_ns"]
    SEQS_FIELD_NUMBER: _ClassVar[int]
    WAIT_NS_FIELD_NUMBER: _ClassVar[int]
    seqs: _containers.RepeatedScalarFieldContainer[int]
    wait_ns: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, seqs: _Optional[_Iterable[int]] = ..., wait_ns: _Optional[_Iterable[int]] = ...) -> None: ...

class AugmentParams(_message.Message):
    __slots__ = ["erase_height", "erase_left", "erase_noise", "erase_top", "erase_width", "erased", "flip", "gray", "height", "jitter", "jitter_order", "left", "magnitude", "num_ops", "op", "sigma", "top", "width"]
    ERASED_FIELD_NUMBER: _ClassVar[int]
    ERASE_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    ERASE_LEFT_FIELD_NUMBER: _ClassVar[int]
    ERASE_NOISE_FIELD_NUMBER: _ClassVar[int]
    ERASE_TOP_FIELD_NUMBER: _ClassVar[int]
    ERASE_WIDTH_FIELD_NUMBER: _ClassVar[int]
    FLIP_FIELD_NUMBER: _ClassVar[int]
    GRAY_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    JITTER_ORDER_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    MAGNITUDE_FIELD_NUMBER: _ClassVar[int]
    NUM_OPS_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    SIGMA_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    erase_height: _containers.RepeatedScalarFieldContainer[int]
    erase_left: _containers.RepeatedScalarFieldContainer[int]
    erase_noise: _containers.RepeatedScalarFieldContainer[int]
    erase_top: _containers.RepeatedScalarFieldContainer[int]
    erase_width: _containers.RepeatedScalarFieldContainer[int]
    erased: _containers.RepeatedScalarFieldContainer[bool]
    flip: _containers.RepeatedScalarFieldContainer[bool]
    gray: _containers.RepeatedScalarFieldContainer[bool]
    height: _containers.RepeatedScalarFieldContainer[int]
    jitter: _containers.RepeatedScalarFieldContainer[float]
    jitter_order: _containers.RepeatedScalarFieldContainer[int]
    left: _containers.RepeatedScalarFieldContainer[int]
    magnitude: _containers.RepeatedScalarFieldContainer[float]
    num_ops: _containers.RepeatedScalarFieldContainer[int]
    op: _containers.RepeatedScalarFieldContainer[int]
    sigma: _containers.RepeatedScalarFieldContainer[float]
    top: _containers.RepeatedScalarFieldContainer[int]
    width: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, top: _Optional[_Iterable[int]] = ..., left: _Optional[_Iterable[int]] = ..., flip: _Optional[_Iterable[bool]] = ..., height: _Optional[_Iterable[int]] = ..., width: _Optional[_Iterable[int]] = ..., jitter_order: _Optional[_Iterable[int]] = ..., jitter: _Optional[_Iterable[float]] = ..., gray: _Optional[_Iterable[bool]] = ..., sigma: _Optional[_Iterable[float]] = ..., num_ops: _Optional[_Iterable[int]] = ..., op: _Optional[_Iterable[int]] = ..., magnitude: _Optional[_Iterable[float]] = ..., erased: _Optional[_Iterable[bool]] = ..., erase_top: _Optional[_Iterable[int]] = ..., erase_left: _Optional[_Iterable[int]] = ..., erase_height: _Optional[_Iterable[int]] = ..., erase_width: _Optional[_Iterable[int]] = ..., erase_noise: _Optional[_Iterable[int]] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ["batch_index", "data", "dtype", "epoch", "field_data", "field_ends", "field_present", "indices", "label_set_ends", "label_sets", "labels", "layout", "mix", "params", "seq", "shape", "shm"]
    BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FIELD_DATA_FIELD_NUMBER: _ClassVar[int]
    FIELD_ENDS_FIELD_NUMBER: _ClassVar[int]
    FIELD_PRESENT_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LABEL_SETS_FIELD_NUMBER: _ClassVar[int]
    LABEL_SET_ENDS_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    MIX_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHM_FIELD_NUMBER: _ClassVar[int]
    batch_index: int
    data: bytes
    dtype: DType
    epoch: int
    field_data: _containers.RepeatedScalarFieldContainer[bytes]
    field_ends: _containers.RepeatedScalarFieldContainer[int]
    field_present: _containers.RepeatedScalarFieldContainer[bool]
    indices: _containers.RepeatedScalarFieldContainer[int]
    label_set_ends: _containers.RepeatedScalarFieldContainer[int]
    label_sets: _containers.RepeatedScalarFieldContainer[int]
    labels: _containers.RepeatedScalarFieldContainer[int]
    layout: Layout
    mix: MixRecord
    params: AugmentParams
    seq: int
    shape: _containers.RepeatedScalarFieldContainer[int]
    shm: ShmRef
    def __init__(self, seq: _Optional[int] = ..., epoch: _Optional[int] = ..., batch_index: _Optional[int] = ..., indices: _Optional[_Iterable[int]] = ..., labels: _Optional[_Iterable[int]] = ..., dtype: _Optional[_Union[DType, str]] = ..., layout: _Optional[_Union[Layout, str]] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ..., shm: _Optional[_Union[ShmRef, _Mapping]] = ..., params: _Optional[_Union[AugmentParams, _Mapping]] = ..., mix: _Optional[_Union[MixRecord, _Mapping]] = ..., field_data: _Optional[_Iterable[bytes]] = ..., field_ends: _Optional[_Iterable[int]] = ..., field_present: _Optional[_Iterable[bool]] = ..., label_sets: _Optional[_Iterable[int]] = ..., label_set_ends: _Optional[_Iterable[int]] = ...) -> None: ...

class Dataset(_message.Message):
    __slots__ = ["classes", "default_augment", "epoch_samples", "fingerprint", "format", "layout", "name", "shape", "size"]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_AUGMENT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    classes: _containers.RepeatedScalarFieldContainer[str]
    default_augment: str
    epoch_samples: int
    fingerprint: str
    format: str
    layout: Layout
    name: str
    shape: ImageShape
    size: int
    def __init__(self, name: _Optional[str] = ..., format: _Optional[str] = ..., size: _Optional[int] = ..., classes: _Optional[_Iterable[str]] = ..., shape: _Optional[_Union[ImageShape, _Mapping]] = ..., layout: _Optional[_Union[Layout, str]] = ..., default_augment: _Optional[str] = ..., fingerprint: _Optional[str] = ..., epoch_samples: _Optional[int] = ...) -> None: ...

class GetSamplesRequest(_message.Message):
    __slots__ = ["augment", "dataset", "dtype", "epoch", "include_params", "indices", "layout", "seed"]
    AUGMENT_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PARAMS_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    augment: str
    dataset: str
    dtype: DType
    epoch: int
    include_params: bool
    indices: _containers.RepeatedScalarFieldContainer[int]
    layout: Layout
    seed: int
    def __init__(self, dataset: _Optional[str] = ..., indices: _Optional[_Iterable[int]] = ..., augment: _Optional[str] = ..., dtype: _Optional[_Union[DType, str]] = ..., layout: _Optional[_Union[Layout, str]] = ..., seed: _Optional[int] = ..., epoch: _Optional[int] = ..., include_params: bool = ...) -> None: ...

class GetSamplesResponse(_message.Message):
    __slots__ = ["augment", "dtype", "layout", "params", "samples"]
    class Sample(_message.Message):
        __slots__ = ["data", "index", "label", "shape"]
        DATA_FIELD_NUMBER: _ClassVar[int]
        INDEX_FIELD_NUMBER: _ClassVar[int]
        LABEL_FIELD_NUMBER: _ClassVar[int]
        SHAPE_FIELD_NUMBER: _ClassVar[int]
        data: bytes
        index: int
        label: int
        shape: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, index: _Optional[int] = ..., label: _Optional[int] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...
    AUGMENT_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    augment: str
    dtype: DType
    layout: Layout
    params: AugmentParams
    samples: _containers.RepeatedCompositeFieldContainer[GetSamplesResponse.Sample]
    def __init__(self, samples: _Optional[_Iterable[_Union[GetSamplesResponse.Sample, _Mapping]]] = ..., dtype: _Optional[_Union[DType, str]] = ..., layout: _Optional[_Union[Layout, str]] = ..., augment: _Optional[str] = ..., params: _Optional[_Union[AugmentParams, _Mapping]] = ...) -> None: ...

class ImageShape(_message.Message):
    __slots__ = ["channels", "height", "width"]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    channels: int
    height: int
    width: int
    def __init__(self, height: _Optional[int] = ..., width: _Optional[int] = ..., channels: _Optional[int] = ...) -> None: ...

class ListDatasetsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListDatasetsResponse(_message.Message):
    __slots__ = ["datasets"]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    datasets: _containers.RepeatedCompositeFieldContainer[Dataset]
    def __init__(self, datasets: _Optional[_Iterable[_Union[Dataset, _Mapping]]] = ...) -> None: ...

class MixRecord(_message.Message):
    __slots__ = ["box_height", "box_left", "box_top", "box_width", "kind", "lam"]
    BOX_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    BOX_LEFT_FIELD_NUMBER: _ClassVar[int]
    BOX_TOP_FIELD_NUMBER: _ClassVar[int]
    BOX_WIDTH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LAM_FIELD_NUMBER: _ClassVar[int]
    box_height: int
    box_left: int
    box_top: int
    box_width: int
    kind: MixKind
    lam: float
    def __init__(self, kind: _Optional[_Union[MixKind, str]] = ..., lam: _Optional[float] = ..., box_top: _Optional[int] = ..., box_left: _Optional[int] = ..., box_height: _Optional[int] = ..., box_width: _Optional[int] = ...) -> None: ...

class Open(_message.Message):
    __slots__ = ["augment", "batch_size", "client_name", "dataset", "drop_last", "drop_last_batch", "dtype", "epochs", "include_params", "layout", "max_in_flight", "no_shuffle", "on_demand", "rank", "seed", "shm_lane", "start_batch", "start_epoch", "start_offset", "transport", "values_on_client", "world"]
    AUGMENT_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DROP_LAST_BATCH_FIELD_NUMBER: _ClassVar[int]
    DROP_LAST_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PARAMS_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    NO_SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    ON_DEMAND_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SHM_LANE_FIELD_NUMBER: _ClassVar[int]
    START_BATCH_FIELD_NUMBER: _ClassVar[int]
    START_EPOCH_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    VALUES_ON_CLIENT_FIELD_NUMBER: _ClassVar[int]
    WORLD_FIELD_NUMBER: _ClassVar[int]
    augment: str
    batch_size: int
    client_name: str
    dataset: str
    drop_last: bool
    drop_last_batch: bool
    dtype: DType
    epochs: int
    include_params: bool
    layout: Layout
    max_in_flight: int
    no_shuffle: bool
    on_demand: bool
    rank: int
    seed: int
    shm_lane: bool
    start_batch: int
    start_epoch: int
    start_offset: int
    transport: Transport
    values_on_client: bool
    world: int
    def __init__(self, dataset: _Optional[str] = ..., rank: _Optional[int] = ..., world: _Optional[int] = ..., batch_size: _Optional[int] = ..., seed: _Optional[int] = ..., no_shuffle: bool = ..., drop_last: bool = ..., drop_last_batch: bool = ..., start_epoch: _Optional[int] = ..., start_batch: _Optional[int] = ..., epochs: _Optional[int] = ..., augment: _Optional[str] = ..., dtype: _Optional[_Union[DType, str]] = ..., layout: _Optional[_Union[Layout, str]] = ..., transport: _Optional[_Union[Transport, str]] = ..., max_in_flight: _Optional[int] = ..., include_params: bool = ..., client_name: _Optional[str] = ..., on_demand: bool = ..., values_on_client: bool = ..., start_offset: _Optional[int] = ..., shm_lane: bool = ...) -> None: ...

class SampleNamesRequest(_message.Message):
    __slots__ = ["count", "dataset", "start"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    count: int
    dataset: str
    start: int
    def __init__(self, dataset: _Optional[str] = ..., start: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class SampleNamesResponse(_message.Message):
    __slots__ = ["named", "names", "size", "start"]
    NAMED_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    named: bool
    names: _containers.RepeatedScalarFieldContainer[str]
    size: int
    start: int
    def __init__(self, start: _Optional[int] = ..., names: _Optional[_Iterable[str]] = ..., named: bool = ..., size: _Optional[int] = ...) -> None: ...

class ShmRef(_message.Message):
    __slots__ = ["generation", "length", "offset", "slot"]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    generation: int
    length: int
    offset: int
    slot: int
    def __init__(self, slot: _Optional[int] = ..., generation: _Optional[int] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class ShmRegion(_message.Message):
    __slots__ = ["fd_socket", "lane", "locked", "path", "size", "slot_count", "slot_size", "token"]
    FD_SOCKET_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    LOCKED_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SLOT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SLOT_SIZE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    fd_socket: str
    lane: bool
    locked: bool
    path: str
    size: int
    slot_count: int
    slot_size: int
    token: bytes
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., slot_size: _Optional[int] = ..., slot_count: _Optional[int] = ..., locked: bool = ..., fd_socket: _Optional[str] = ..., token: _Optional[bytes] = ..., lane: bool = ...) -> None: ...

class StreamHeader(_message.Message):
    __slots__ = ["augment", "batch_mix", "batch_size", "batches_per_epoch", "dataset_size", "dtype", "epoch_samples", "field_names", "fingerprint", "layout", "max_in_flight", "multi_label", "num_classes", "on_demand", "sample_bytes", "sample_shape", "samples_per_epoch", "shm", "start_batch", "start_epoch", "start_offset", "transport", "value_dtype", "value_table"]
    AUGMENT_FIELD_NUMBER: _ClassVar[int]
    BATCHES_PER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BATCH_MIX_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    DATASET_SIZE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    FIELD_NAMES_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    MULTI_LABEL_FIELD_NUMBER: _ClassVar[int]
    NUM_CLASSES_FIELD_NUMBER: _ClassVar[int]
    ON_DEMAND_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_PER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHM_FIELD_NUMBER: _ClassVar[int]
    START_BATCH_FIELD_NUMBER: _ClassVar[int]
    START_EPOCH_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    VALUE_DTYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_TABLE_FIELD_NUMBER: _ClassVar[int]
    augment: str
    batch_mix: bool
    batch_size: int
    batches_per_epoch: int
    dataset_size: int
    dtype: DType
    epoch_samples: int
    field_names: _containers.RepeatedScalarFieldContainer[str]
    fingerprint: str
    layout: Layout
    max_in_flight: int
    multi_label: bool
    num_classes: int
    on_demand: bool
    sample_bytes: int
    sample_shape: _containers.RepeatedScalarFieldContainer[int]
    samples_per_epoch: int
    shm: ShmRegion
    start_batch: int
    start_epoch: int
    start_offset: int
    transport: Transport
    value_dtype: DType
    value_table: bytes
    def __init__(self, dataset_size: _Optional[int] = ..., samples_per_epoch: _Optional[int] = ..., batches_per_epoch: _Optional[int] = ..., batch_size: _Optional[int] = ..., dtype: _Optional[_Union[DType, str]] = ..., layout: _Optional[_Union[Layout, str]] = ..., sample_shape: _Optional[_Iterable[int]] = ..., sample_bytes: _Optional[int] = ..., augment: _Optional[str] = ..., transport: _Optional[_Union[Transport, str]] = ..., max_in_flight: _Optional[int] = ..., shm: _Optional[_Union[ShmRegion, _Mapping]] = ..., start_epoch: _Optional[int] = ..., start_batch: _Optional[int] = ..., start_offset: _Optional[int] = ..., on_demand: bool = ..., fingerprint: _Optional[str] = ..., value_table: _Optional[bytes] = ..., value_dtype: _Optional[_Union[DType, str]] = ..., num_classes: _Optional[int] = ..., batch_mix: bool = ..., epoch_samples: _Optional[int] = ..., field_names: _Optional[_Iterable[str]] = ..., multi_label: bool = ...) -> None: ...

class StreamReply(_message.Message):
    __slots__ = ["batch", "header"]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    batch: Batch
    header: StreamHeader
    def __init__(self, header: _Optional[_Union[StreamHeader, _Mapping]] = ..., batch: _Optional[_Union[Batch, _Mapping]] = ...) -> None: ...

class StreamRequest(_message.Message):
    __slots__ = ["ack", "open", "want"]
    ACK_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    WANT_FIELD_NUMBER: _ClassVar[int]
    ack: Ack
    open: Open
    want: Want
    def __init__(self, open: _Optional[_Union[Open, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., want: _Optional[_Union[Want, _Mapping]] = ...) -> None: ...

class Want(_message.Message):
    __slots__ = ["batches"]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    batches: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, batches: _Optional[_Iterable[int]] = ...) -> None: ...

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Layout(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Transport(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MixKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
