//! torchvision Inception v3 (Szegedy et al. 2016) with its auxiliary classifier, 299x299 input.
//!
//! Every convolution is torchvision's BasicConv2d: Conv2D without bias, BatchNorm with gamma and
//! beta, ReLU. Branch outputs are concatenated along channels.

use super::builder::Net;
use super::cnn::{Act, Conv, adaptive_avg_pool, concat, conv_bn_relu, flatten, image_input, pool};
use super::layers::{dense, dropout};

const CLASSES: usize = 1000;

fn cbr(net: &mut Net, p: &str, name: &str, x: Act, cout: usize, g: Conv) -> Act {
    conv_bn_relu(net, &format!("{p}/{name}"), x, cout, g)
}

fn one(k: usize) -> Conv {
    Conv::sq(k, 1, 0)
}

/// 3x3 average pool, stride 1, padding 1 (keeps the map size) for the pool branches.
fn pool_branch(net: &mut Net, p: &str, x: Act, cout: usize) -> Act {
    let pooled = pool(
        net,
        &format!("{p}/branch_pool"),
        x,
        false,
        Conv::sq(3, 1, 1),
    );
    cbr(net, p, "branch_pool", pooled, cout, one(1))
}

/// InceptionA (35x35): 1x1, 5x5, double 3x3 and pool branches.
fn block_a(net: &mut Net, p: &str, x: Act, pool_features: usize) -> Act {
    let b1 = cbr(net, p, "branch1x1", x, 64, one(1));
    let b5 = cbr(net, p, "branch5x5_1", x, 48, one(1));
    let b5 = cbr(net, p, "branch5x5_2", b5, 64, Conv::sq(5, 1, 2));
    let b3 = cbr(net, p, "branch3x3dbl_1", x, 64, one(1));
    let b3 = cbr(net, p, "branch3x3dbl_2", b3, 96, Conv::sq(3, 1, 1));
    let b3 = cbr(net, p, "branch3x3dbl_3", b3, 96, Conv::sq(3, 1, 1));
    let bp = pool_branch(net, p, x, pool_features);
    concat(net, p, &[b1, b5, b3, bp])
}

/// InceptionB: grid reduction 35x35 -> 17x17.
fn block_b(net: &mut Net, p: &str, x: Act) -> Act {
    let b3 = cbr(net, p, "branch3x3", x, 384, Conv::sq(3, 2, 0));
    let bd = cbr(net, p, "branch3x3dbl_1", x, 64, one(1));
    let bd = cbr(net, p, "branch3x3dbl_2", bd, 96, Conv::sq(3, 1, 1));
    let bd = cbr(net, p, "branch3x3dbl_3", bd, 96, Conv::sq(3, 2, 0));
    let bp = pool(net, &format!("{p}/branch_pool"), x, true, Conv::sq(3, 2, 0));
    concat(net, p, &[b3, bd, bp])
}

/// InceptionC (17x17): factorised 7x7 convolutions with `c7` inner channels.
fn block_c(net: &mut Net, p: &str, x: Act, c7: usize) -> Act {
    let b1 = cbr(net, p, "branch1x1", x, 192, one(1));
    let b7 = cbr(net, p, "branch7x7_1", x, c7, one(1));
    let b7 = cbr(net, p, "branch7x7_2", b7, c7, Conv::same(1, 7));
    let b7 = cbr(net, p, "branch7x7_3", b7, 192, Conv::same(7, 1));
    let bd = cbr(net, p, "branch7x7dbl_1", x, c7, one(1));
    let bd = cbr(net, p, "branch7x7dbl_2", bd, c7, Conv::same(7, 1));
    let bd = cbr(net, p, "branch7x7dbl_3", bd, c7, Conv::same(1, 7));
    let bd = cbr(net, p, "branch7x7dbl_4", bd, c7, Conv::same(7, 1));
    let bd = cbr(net, p, "branch7x7dbl_5", bd, 192, Conv::same(1, 7));
    let bp = pool_branch(net, p, x, 192);
    concat(net, p, &[b1, b7, bd, bp])
}

/// InceptionD: grid reduction 17x17 -> 8x8.
fn block_d(net: &mut Net, p: &str, x: Act) -> Act {
    let b3 = cbr(net, p, "branch3x3_1", x, 192, one(1));
    let b3 = cbr(net, p, "branch3x3_2", b3, 320, Conv::sq(3, 2, 0));
    let b7 = cbr(net, p, "branch7x7x3_1", x, 192, one(1));
    let b7 = cbr(net, p, "branch7x7x3_2", b7, 192, Conv::same(1, 7));
    let b7 = cbr(net, p, "branch7x7x3_3", b7, 192, Conv::same(7, 1));
    let b7 = cbr(net, p, "branch7x7x3_4", b7, 192, Conv::sq(3, 2, 0));
    let bp = pool(net, &format!("{p}/branch_pool"), x, true, Conv::sq(3, 2, 0));
    concat(net, p, &[b3, b7, bp])
}

/// InceptionE (8x8): expanded filter bank with split 1x3 / 3x1 outputs.
fn block_e(net: &mut Net, p: &str, x: Act) -> Act {
    let b1 = cbr(net, p, "branch1x1", x, 320, one(1));
    let b3 = cbr(net, p, "branch3x3_1", x, 384, one(1));
    let b3a = cbr(net, p, "branch3x3_2a", b3, 384, Conv::same(1, 3));
    let b3b = cbr(net, p, "branch3x3_2b", b3, 384, Conv::same(3, 1));
    let b3 = concat(net, &format!("{p}/branch3x3"), &[b3a, b3b]);
    let bd = cbr(net, p, "branch3x3dbl_1", x, 448, one(1));
    let bd = cbr(net, p, "branch3x3dbl_2", bd, 384, Conv::sq(3, 1, 1));
    let bda = cbr(net, p, "branch3x3dbl_3a", bd, 384, Conv::same(1, 3));
    let bdb = cbr(net, p, "branch3x3dbl_3b", bd, 384, Conv::same(3, 1));
    let bd = concat(net, &format!("{p}/branch3x3dbl"), &[bda, bdb]);
    let bp = pool_branch(net, p, x, 192);
    concat(net, p, &[b1, b3, bd, bp])
}

/// InceptionAux on the 17x17x768 map: 5x5/3 average pool, 1x1 conv, 5x5 conv, FC.
fn aux_head(net: &mut Net, x: Act) {
    let p = "AuxLogits";
    let h = pool(net, &format!("{p}/pool"), x, false, Conv::sq(5, 3, 0));
    let h = cbr(net, p, "conv0", h, 128, one(1));
    let h = cbr(net, p, "conv1", h, 768, Conv::sq(5, 1, 0));
    let h = adaptive_avg_pool(net, &format!("{p}/avgpool"), h, 1);
    let f = flatten(net, p, h);
    let logits = dense(net, &format!("{p}/fc"), f, 1, 768, CLASSES);
    net.xent_loss("aux_loss", logits, 1.0, CLASSES as f64);
}

pub(crate) fn inception_v3(net: &mut Net) {
    let x = image_input(net, 299);
    let x = conv_bn_relu(net, "Conv2d_1a_3x3", x, 32, Conv::sq(3, 2, 0));
    let x = conv_bn_relu(net, "Conv2d_2a_3x3", x, 32, Conv::sq(3, 1, 0));
    let x = conv_bn_relu(net, "Conv2d_2b_3x3", x, 64, Conv::sq(3, 1, 1));
    let x = pool(net, "maxpool1", x, true, Conv::sq(3, 2, 0));
    let x = conv_bn_relu(net, "Conv2d_3b_1x1", x, 80, one(1));
    let x = conv_bn_relu(net, "Conv2d_4a_3x3", x, 192, Conv::sq(3, 1, 0));
    let x = pool(net, "maxpool2", x, true, Conv::sq(3, 2, 0));
    let x = block_a(net, "Mixed_5b", x, 32);
    let x = block_a(net, "Mixed_5c", x, 64);
    let x = block_a(net, "Mixed_5d", x, 64);
    let x = block_b(net, "Mixed_6a", x);
    let x = block_c(net, "Mixed_6b", x, 128);
    let x = block_c(net, "Mixed_6c", x, 160);
    let x = block_c(net, "Mixed_6d", x, 160);
    let x = block_c(net, "Mixed_6e", x, 192);
    // Kept in forward-only graphs too so both variants hold the same parameters; its loss
    // (and so its backward pass) only exists in training graphs.
    aux_head(net, x);
    let x = block_d(net, "Mixed_7a", x);
    let x = block_e(net, "Mixed_7b", x);
    let x = block_e(net, "Mixed_7c", x);
    let x = adaptive_avg_pool(net, "avgpool", x, 1);
    let f = flatten(net, "flatten", x);
    let f = dropout(net, "dropout", f);
    let logits = dense(net, "fc", f, 1, 2048, CLASSES);
    net.xent_loss("loss", logits, 1.0, CLASSES as f64);
}
