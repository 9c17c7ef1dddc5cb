"""kbtp: kind=wrong expect=incorrect
Plain PyTorch with a realistic bug: the softmax is taken over the batch dimension (dim=0)
instead of the features (dim=1). The outputs are small either way (~1e-4 and ~1e-3), so an
absolute tolerance of 1e-2 alone would not notice; 1e-4, or the normalised error, does.
"""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = F.gelu(self.linear(x))
        return F.softmax(x, dim=0)  # BUG: the reference normalises each row (dim=1)
