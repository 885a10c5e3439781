"""Tree models on SubGraph/InvokeOp recursion; weights from ``.npz``.

    from recursion.models import ChildSumTreeLSTM
    model = ChildSumTreeLSTM.from_npz("weights.npz")
    H = model.encode(trees)        # [len(trees), hidden], root hidden states
"""

from recursion.models.base import TreeModel
from recursion.models.childsum import ChildSumTreeLSTM
from recursion.models.nary import BinaryTreeLSTM, NaryTreeLSTM
from recursion.models.rnn import RNTN, TreeRNN

__all__ = ["RNTN", "BinaryTreeLSTM", "ChildSumTreeLSTM", "NaryTreeLSTM", "TreeModel", "TreeRNN"]
