"""Attention from Scratch: the experiments whose results the course ships in ``data/``.

Each module trains something longer than a lesson cell may take, over several seeds, writes its
weights and ``results.json`` into ``data/`` and reads them back for the lessons. Every command
is listed, with what it writes and how long it takes, in ``data/README.md``:

- ``training``       lesson 01's RNN, LSTM and attention classifier -> data/sentiment/
  (the lessons read them back through ``helpers.trained``)
- ``rnn_control``    lesson 01's RNN trained without fillers -> data/sentiment_control/
- ``rnn_spread``     lesson 01's runs over more seeds, kernel paths and epochs -> data/sentiment_spread/
- ``scaled_lookup``  lesson 03's key-value lookup with and without √d_k -> data/scaled_lookup/
- ``head_count``     lesson 06's one-head classifier -> data/heads/
- ``norm_warmup``    lesson 07's pre-/post-norm and warm-up runs -> data/norm_warmup/
- ``decoding``       lesson 07's encoder-decoder that reverses sequences -> data/reverse/
- ``cls_reading``    lesson 07's [CLS] reading of lesson 01's models (nothing trained) -> data/cls_reading/
- ``vision``         lesson 09's tiny ViT and small CNN -> data/vision/
- ``tiny_gpt``       lesson 11's GPT trained on the course's prose -> data/tiny_gpt/
- ``cost_benchmark`` lesson 08's three attentions at longer lengths (prints a table, writes nothing)
- ``kernels``        runs an experiment's jobs under several of PyTorch's CPU kernel paths

Each runs as ``python -m experiments.<module>``.

Used by: the lessons that show these results (they load them, and may retrain in a cell), the
tests that check the shipped files, and whoever reruns an experiment. They build on the lesson
library, ``helpers``; nothing in ``helpers`` imports them.
"""
