mod codec;
mod decoding;
mod fixtures;
