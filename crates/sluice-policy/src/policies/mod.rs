//! The online replacement policies, one per file. Each file opens with the algorithm in
//! plain words, its paper, the time complexity of every operation and its measured memory
//! per resident object. [`crate::build`] constructs them by name.

mod arc;
mod fifo;
mod gdsf;
mod lfu;
mod lfuda;
mod lru;
mod maxs;
mod rand;
mod s3fifo;
mod sieve;
mod wtinylfu;

pub use self::arc::Arc;
pub use self::fifo::Fifo;
pub use self::gdsf::Gdsf;
pub use self::lfu::Lfu;
pub use self::lfuda::LfuDa;
pub use self::lru::Lru;
pub use self::maxs::Maxs;
pub use self::rand::Rand;
pub use self::s3fifo::S3Fifo;
pub use self::sieve::Sieve;
pub use self::wtinylfu::WTinyLfu;
