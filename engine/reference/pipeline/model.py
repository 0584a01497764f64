"""The whole reference model in one module tree, so one seed and one hash cover every weight."""

from __future__ import annotations

from torch import nn

from engine.reference.pipeline.decoders import AudioDecoder, VideoDecoder
from engine.reference.pipeline.dit import JointDiT
from engine.reference.pipeline.encoders import AudioEncoder, ImageEncoder, TextEncoder
from engine.reference.pipeline.weights import ModelShape


class ReferenceModel(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape
        self.text_encoder = TextEncoder(shape)
        self.image_encoder = ImageEncoder(shape)
        self.audio_encoder = AudioEncoder(shape)
        self.dit = JointDiT(shape)
        self.video_decoder = VideoDecoder(shape)
        self.audio_decoder = AudioDecoder(shape)
