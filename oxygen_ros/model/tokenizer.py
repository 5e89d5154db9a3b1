"""Tokenizers: byte-level for the presets (PaliGemma SentencePiece comes with checkpoints).

Every tokenizer has stream(): an object turning token ids into text pieces as they are
decoded (push(id) -> str, flush() -> str), never splitting a character."""

import codecs
from typing import Sequence


class ByteTokenizer:
    """UTF-8 bytes are ids 0-255; then padding, beginning- and end-of-sequence."""

    pad_id, bos_id, eos_id = 256, 257, 258
    vocab_size = 259

    def encode(self, text: str, bos: bool = True) -> list[int]:
        return ([self.bos_id] if bos else []) + list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def stream(self) -> "ByteStream":
        return ByteStream()


class ByteStream:
    """Incremental UTF-8: a partial character waits for its next bytes, an invalid byte
    becomes U+FFFD at once (so random bytes still stream)."""

    def __init__(self):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        return self._decoder.decode(bytes([token_id])) if token_id < 256 else ""

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class StreamDecoder:
    """Streaming for tokenizers that decode whole sequences: decode all ids so far and emit
    what is new, holding back a trailing U+FFFD that may be a character still incomplete."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.emitted = 0

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        text = self.tokenizer.decode(self.ids)
        if text.endswith("\ufffd"):       # an incomplete character: wait for the rest
            return ""
        piece, self.emitted = text[self.emitted:], len(text)
        return piece

    def flush(self) -> str:
        text = self.tokenizer.decode(self.ids)
        piece, self.emitted = text[self.emitted:], len(text)
        return piece


def tokenizer_for(config) -> ByteTokenizer:
    """The tokenizer a model config names, where it needs no file (the byte tokenizer)."""
    if config.tokenizer == "bytes":
        return ByteTokenizer()
    raise ValueError(f"model tokenizer {config.tokenizer!r} needs a tokenizer file")


class PaliGemmaTokenizer:
    """The PaliGemma SentencePiece model (from a file: weights cannot be downloaded here)."""

    def __init__(self, path: str):
        import sentencepiece

        if not path:
            raise ValueError("this checkpoint needs the PaliGemma tokenizer: give its "
                             "SentencePiece .model file (the node's `tokenizer` parameter, "
                             "inspect's --tokenizer)")
        try:
            self._sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
        except (OSError, RuntimeError) as error:
            raise ValueError(f"{path}: not a SentencePiece model ({error})") from None
        self.bos_id, self.eos_id, self.pad_id = (self._sp.bos_id(), self._sp.eos_id(),
                                                 self._sp.pad_id())
        self.vocab_size = self._sp.get_piece_size()

    def encode(self, text: str, bos: bool = True) -> list[int]:
        return self._sp.encode(text, add_bos=bos)

    def decode(self, ids: Sequence[int]) -> str:
        return self._sp.decode([i for i in ids if 0 <= i < self.vocab_size])

    def stream(self) -> "StreamDecoder":
        return StreamDecoder(self)
