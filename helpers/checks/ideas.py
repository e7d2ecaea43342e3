"""The first hint of each exercise: the idea to think about, or where to look — never the line.

``hint()`` gives it the first time it is called after a check fails; the fixing line of the
mistake the check named comes only with the second call (``hint()`` again, or ``hint(2)``). An
exercise without an entry here goes straight to the fix.
"""

from __future__ import annotations

IDEAS = {
    # 01 · why recurrent networks forget
    "rnn_forward": "One step reads two things, the current input row and the previous hidden state, "
                   "each through its own matrix (tokens are rows: x @ w). Start from the state h0 (zeros "
                   "when none is given) and return every state, in order, one row per input row.",
    "gradient_by_position": "The question is how strongly the output depends on each input row: one "
                            "number per position, the size of the gradient of f with respect to that "
                            "row. Which tensor must track gradients, and over which axis is the size "
                            "taken? The caller's x must come back untouched.",
    # 02 · attention is a differentiable lookup
    "softmax": "Two properties to keep: each slice along `axis` becomes positive weights that sum to 1, "
               "and very large or −∞ inputs must neither overflow nor give NaN. A softmax does not "
               "change when the same number is subtracted from every entry of a slice.",
    "attention": "Follow the worked example's three steps: compare every query with every key, turn "
                 "each query's scores into weights over the keys, average the values with those "
                 "weights. Which axis do the weights of one query run along, and what keeps the "
                 "scores' spread independent of d_k?",
    "self_attention": "Queries, keys and values all come from the same x, each through its own "
                      "matrix; everything after that is a function you have already written.",
    # 03 · why divide by √d_k
    "score_std": "What is measured is the spread of q·k over many random pairs — a standard "
                 "deviation, not a mean — with every entry of q and k drawn from N(0, 1), as the "
                 "exercise says, and the generator seeded as it says.",
    "entropy": "A weight of exactly 0 contributes 0: that is the limit of p log p as p → 0. The task "
               "is to get that 0 without ever evaluating log(0) — NumPy warns the moment it does, "
               "even if the result is thrown away afterwards.",
    "softmax_jacobian": "∂p_i/∂z_j has two cases, i = j and i ≠ j. Differentiate "
                        "p_i = e^(z_i) / Σ_k e^(z_k) for each case on paper first, then write the "
                        "matrix that holds both.",
    # 04 · masking
    "causal_mask": "Row i is the query, column j the key. Which keys may query i read — and is "
                   "query i itself among them? Sketch the matrix for four tokens.",
    "padding_mask": "Each sequence's real tokens come first: position t is real exactly when t is "
                    "smaller than that sequence's length. Compare all positions with all lengths at "
                    "once.",
    "masked_attention": "A blocked key must get exactly zero weight, and the allowed keys must share "
                        "all of it. Decide whether to act on the scores or on the weights, and what a "
                        "query row with no allowed key must give.",
    "causal_attention_with_cache": "At step t the query of position t may see the keys and values of "
                                   "positions 0 … t and nothing later; the caches hold exactly those, "
                                   "one more row after every step.",
    "attention_matrix_bytes": "Count the numbers before the bytes: how many scores does one head "
                              "store for n tokens, how many heads are there, and how many bytes does "
                              "each number take?",
    # 05 · positional encoding
    "sinusoidal_encoding": "Dimensions 2i and 2i + 1 form pair i and share one frequency, which "
                           "falls from pair to pair; one of the pair takes the sine, the other the "
                           "cosine. Check the exponent's i against the formula at the top of the "
                           "lesson.",
    "rope": "RoPE turns each pair of dimensions (2i, 2i + 1) of a vector as a point in a plane, by an "
            "angle that is the position times the pair's frequency — the frequencies of the "
            "sinusoidal encoding. Which of the pair gets the cosine term, which the sine, and with "
            "which sign?",
    # 06 · multi-head attention
    "split_heads": "Head h owns features h·d_h … (h+1)·d_h − 1 of every token. Cut the feature axis "
                   "into (heads, width) first; only then move the head axis in front of the tokens. "
                   "The tagged tokens above the exercise show which numbers must land in head 0.",
    "merge_heads": "Merging must undo splitting exactly: the token axis goes back in front of the "
                   "head axis before (heads, width) are joined into D.",
    "multi_head_attention": "Project, split into heads, attend in every head at once, merge, mix with "
                            "w_o. Check each intermediate shape against the exercise's list; the "
                            "scale belongs to the width of one head.",
    # 07 · the Transformer block
    "layer_norm": "Per token, over its D features: centre, divide by the spread, then scale and "
                  "shift. Which variance — the one that divides by D or by D − 1 — and where does "
                  "eps go?",
    "feed_forward": "Two linear maps with one nonlinearity between them, (…, D) → (…, d_ff) → (…, D). "
                    "What does the second map's output go through — anything?",
    "encoder_block": "Pre-norm: each sub-layer reads a normalised copy of x and adds its result to x "
                     "itself, first attention, then the FFN; nothing normalises the sum. The heads "
                     "are laid out as in lesson 06, and eps comes from params.",
    # 08 · the cost of attention
    "layer_macs": "A product (a, b) @ (b, c) costs a·b·c multiply-adds — one per term of each "
                  "entry, not two. Apply that rule to every product of the table, row by row.",
    "score_share": "What share of the layer's multiply-adds goes into comparing tokens with each "
                   "other? The exercise before this one counted every part.",
    "online_softmax_attention": "Between blocks keep three running quantities per query: the largest "
                                "score so far, the sum of exponentials and the weighted sum of "
                                "values. When a block raises the maximum, what was summed against the "
                                "old one must be brought up to date first.",
    # 09 · from words to pixels
    "patchify": "Patches are read row of patches after row, left to right, and each patch is "
                "flattened channel by channel, then row by row inside the patch — the order every ViT "
                "uses. The tagged image above the exercise shows where each pixel must land.",
    "n_tokens": "How many P × P patches fit along each side of the image, and how many in all? "
                "Then one more token if [CLS] is added.",
    "conv_to_linear": "A convolution with kernel P and stride P applies one and the same linear map "
                      "to every patch. Its weight, read in the order patchify flattens a patch, is "
                      "that map's matrix — mind which axis is the output.",
    # 11 · a small GPT
    "shift_targets": "Position t reads tokens 0 … t and must predict the token that comes next. "
                     "Which slice of the sequence does the model read, and which one is it asked "
                     "to predict? The two overlap in all but one token.",
    "lm_loss": "Every position is one classification over the vocabulary: the loss is the average, "
               "over all B·T positions, of minus the log-probability the softmax gives the right "
               "token — in nats, computed stably.",
    "gpt_logits": "Embed, add positions, run the blocks under a causal mask, normalise, project to "
                  "the vocabulary. Which positions may a token's logits depend on?",
    "lr_at": "Two phases and a floor: a straight climb to peak_lr over the warm-up steps (counting "
             "from step 0), half a cosine down to min_lr by total_steps, then min_lr. Check the "
             "first step, the last warm-up step and total_steps on paper.",
    "train_step": "One step is: forget the last step's gradients, compute the loss, backpropagate, "
                  "limit the size of the gradients, update. Does the order of the last two matter?",
    "sample_next": "Temperature divides the logits before the softmax; top-k keeps the k largest "
                   "logits and nothing else; then draw — at random, with the generator — except at "
                   "temperature 0, which takes the largest.",
    "kv_cache_bytes": "Count the numbers first: keys and values, per layer, per sequence in the batch, "
                      "per token, per key/value head, per feature of a head; then the bytes each takes.",
    "repeat_kv": "Query heads h = 0, 1, … use key/value head h // n_rep: each key/value head must "
                 "appear n_rep times in a row, not the whole set of heads n_rep times over.",
}
