//! pCSS: placeholder until its issue lands.

use crate::dist::Layout;
use crate::Ctx;

/// Builds the suffix array with pCSS.
pub fn css(ctx: &Ctx, text: &[u8], layout: &Layout) -> Vec<u64> {
    super::dc3::dc3(ctx, text, layout)
}
