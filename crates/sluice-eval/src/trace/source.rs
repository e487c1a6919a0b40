//! Opening a trace: plain, gzip or zstd, recognised by magic bytes (not by extension).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use ruzstd::decoding::{FrameDecoder, StreamingDecoder};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const BUF: usize = 1 << 16;

/// Opens `path` and undoes gzip or zstd compression if present.
pub(crate) fn open(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    decompress(File::open(path)?)
}

/// Wraps `input`, undoing gzip or zstd compression if its first bytes say so.
pub(crate) fn decompress<R: Read + Send + 'static>(input: R) -> io::Result<Box<dyn BufRead + Send>> {
    let mut input = BufReader::with_capacity(BUF, input);
    let head = input.fill_buf()?;
    if head.starts_with(&GZIP_MAGIC) {
        let gz = flate2::bufread::MultiGzDecoder::new(input);
        return Ok(Box::new(BufReader::with_capacity(BUF, gz)));
    }
    if head.starts_with(&ZSTD_MAGIC) {
        return Ok(Box::new(BufReader::with_capacity(BUF, ZstdFrames::new(input)?)));
    }
    Ok(Box::new(input))
}

/// Decodes every concatenated zstd frame of a stream (ruzstd decodes one frame at a time).
struct ZstdFrames<R: BufRead> {
    current: Option<StreamingDecoder<R, FrameDecoder>>,
}

impl<R: BufRead> ZstdFrames<R> {
    fn new(input: R) -> io::Result<Self> {
        let dec = StreamingDecoder::new(input).map_err(io::Error::other)?;
        Ok(Self { current: Some(dec) })
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(dec) = self.current.as_mut() else { return Ok(0) };
            let n = dec.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let Some(dec) = self.current.take() else { return Ok(0) };
            let (mut input, frame) = dec.into_parts();
            if input.fill_buf()?.is_empty() {
                return Ok(0);
            }
            // `new_with_decoder` reads the next frame's header into the reused decoder.
            self.current = Some(StreamingDecoder::new_with_decoder(input, frame).map_err(io::Error::other)?);
        }
    }
}
