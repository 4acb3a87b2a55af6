"""Neural-network building blocks: Module and layers (recurrent ones in rnn.py), functional ops, init, utils."""
from . import functional  # noqa: F401
from . import init, utils  # noqa: F401
from .parameter import Parameter  # noqa: F401
from .module import Module, ModuleDict, ModuleList, Sequential  # noqa: F401
from .layers import (AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, Dropout, Embedding, Flatten, GELU,  # noqa: F401
                     Identity, Linear, LayerNorm, LogSoftmax, MaxPool2d, ReLU, RMSNorm, Sigmoid, SiLU, Softmax, Tanh)
from .losses import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss,  # noqa: F401
                     HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
                     MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss,
                     CTCLoss, SmoothL1Loss, SoftMarginLoss, TripletMarginLoss)
from .transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer  # noqa: F401
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: F401
