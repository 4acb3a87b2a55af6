"""Neural-network building blocks: Module and layers (recurrent ones in rnn.py), functional ops, init, utils."""
from . import functional  # noqa: F401
from . import init, utils  # noqa: F401
from .parameter import Parameter  # noqa: F401
from .module import Module, ModuleDict, ModuleList, Sequential  # noqa: F401
from .layers import (AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, Dropout, Embedding, Flatten, GELU,  # noqa: F401
                     Identity, Linear, LayerNorm, LogSoftmax, MaxPool2d, ReLU, Sigmoid, Softmax, Tanh,
                     BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, CTCLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss)
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: F401,E402
