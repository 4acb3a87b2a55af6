"""Neural-network building blocks: Module and layers (recurrent ones in rnn.py), functional ops, init, utils."""
from . import functional  # noqa: F401
from . import init, utils  # noqa: F401
from .parameter import Parameter  # noqa: F401
from .module import Module, ModuleDict, ModuleList, Sequential  # noqa: F401
from .layers import (BatchNorm1d, BatchNorm2d, Bilinear, Dropout, Embedding, Flatten, GELU,  # noqa: F401
                     Identity, Linear, LayerNorm, LogSoftmax, PReLU, ReLU, RMSNorm, Sigmoid, SiLU, Softmax, Tanh)
from .activation import (CELU, ELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU,  # noqa: F401
                         LogSigmoid, Mish, ReLU6, RReLU, SELU, Softplus, Softshrink, Softsign, Tanhshrink, Threshold)
from .dropout import AlphaDropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout  # noqa: F401
from .rearrange import ChannelShuffle, Fold, PixelShuffle, PixelUnshuffle, Unfold  # noqa: F401
from .losses import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss,  # noqa: F401
                     HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
                     MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss,
                     CTCLoss, SmoothL1Loss, SoftMarginLoss, TripletMarginLoss)
from .losses import GaussianNLLLoss, TripletMarginWithDistanceLoss  # noqa: F401
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from .normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm  # noqa: F401
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,  # noqa: F401
                      AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, FractionalMaxPool2d,
                      FractionalMaxPool3d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,  # noqa: F401
                      ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                      ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer  # noqa: F401
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from . import parallel  # noqa: F401,E402  (mp.nn.parallel: DataParallel, DistributedDataParallel)
from .parallel import DataParallel  # noqa: F401,E402
