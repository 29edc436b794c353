"""The short sentences the method tests tokenise with the tiny encoder (lengths 4 to 10 words)."""

SENTS = [
    "a man is playing a guitar .",
    "two dogs run on the beach .",
    "the stock market fell sharply today .",
    "a woman is slicing an onion .",
    "children play football in the park after school .",
    "the cat sleeps .",
]
