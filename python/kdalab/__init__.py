"""kdalab: a float64 oracle for the line of sequence mixers that ends in Kimi
Delta Attention, with fla's API.

    import kdalab
    o, ht = kdalab.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    grads = kdalab.chunk_kda_bwd(q, k, v, g, beta, do, dht, initial_state=h0)
    kdalab.testing.assert_close("o", o, my_o, rtol=1e-3)

NumPy arrays or torch tensors in, float64 NumPy arrays out (see kdalab.ops).
With PyTorch, kdalab.torch has the same functions with fla's signatures as
autograd functions (.backward() fills every input's grad).
"""

from ._lib import KdalabError, get_num_threads, release_workspace, set_num_threads
from .attention import parallel_attn, parallel_attn_bwd
from .ops import (DplrGrads, Grads, chunk_delta_rule, chunk_delta_rule_bwd, chunk_dplr_delta_rule,
                  chunk_dplr_delta_rule_bwd, chunk_rwkv7, chunk_rwkv7_bwd,
                  fused_recurrent_dplr_delta_rule, fused_recurrent_dplr_delta_rule_bwd,
                  fused_recurrent_rwkv7, fused_recurrent_rwkv7_bwd,
                  chunk_gated_delta_rule,
                  chunk_gated_delta_rule_bwd, chunk_gla, chunk_gla_bwd, chunk_kda,
                  chunk_kda_bwd, chunk_linear_attn, chunk_linear_attn_bwd, chunk_simple_gla,
                  chunk_simple_gla_bwd, fused_recurrent_delta_rule,
                  fused_recurrent_delta_rule_bwd, fused_recurrent_gated_delta_rule,
                  fused_recurrent_gated_delta_rule_bwd, fused_recurrent_gla,
                  fused_recurrent_gla_bwd, fused_recurrent_kda, fused_recurrent_kda_bwd,
                  fused_recurrent_linear_attn, fused_recurrent_linear_attn_bwd,
                  fused_recurrent_simple_gla, fused_recurrent_simple_gla_bwd)

__version__ = "0.1.0"


def __getattr__(name):
    """kdalab.testing on first use (it imports pytest, where installed, for
    its fixture: import kdalab itself stays light)."""
    if name == "testing":
        import importlib
        return importlib.import_module(".testing", __name__)
    raise AttributeError("module 'kdalab' has no attribute %r" % name)
