//! Convolutional image classifiers (torchvision layouts) and the test MLP.

use super::builder::{Net, Rule, T, unary};
use super::layers::{self, dense, dropout};
use crate::graph::ConvWindow;

/// An NCHW activation: the tensor plus its per-sample shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Act {
    pub t: T,
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Act {
    fn elems(&self) -> f64 {
        (self.c * self.h * self.w) as f64
    }
}

const CLASSES: usize = 1000;

/// Convolution geometry: kernel, stride and padding per axis.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Conv {
    pub kh: usize,
    pub kw: usize,
    pub stride: usize,
    pub ph: usize,
    pub pw: usize,
}

impl Conv {
    /// Square kernel `k`, stride `s`, padding `p`.
    pub(crate) fn sq(k: usize, s: usize, p: usize) -> Conv {
        Conv {
            kh: k,
            kw: k,
            stride: s,
            ph: p,
            pw: p,
        }
    }

    /// `kh x kw` kernel, stride 1, "same" padding (the factorised 1x7 / 7x1 convs).
    pub(crate) fn same(kh: usize, kw: usize) -> Conv {
        Conv {
            kh,
            kw,
            stride: 1,
            ph: kh / 2,
            pw: kw / 2,
        }
    }

    fn window(&self) -> ConvWindow {
        let size = |v: usize| u32::try_from(v).expect("zoo kernels are small");
        ConvWindow {
            kernel: [size(self.kh), size(self.kw)],
            stride: [size(self.stride), size(self.stride)],
        }
    }

    fn out(&self, h: usize, w: usize) -> (usize, usize) {
        (
            (h + 2 * self.ph - self.kh) / self.stride + 1,
            (w + 2 * self.pw - self.kw) / self.stride + 1,
        )
    }
}

pub(crate) fn image_input(net: &mut Net, size: usize) -> Act {
    let t = net.input("images", (3 * size * size) as f64);
    Act {
        t,
        c: 3,
        h: size,
        w: size,
    }
}

/// Conv2D (plus BiasAdd when `bias`).
pub(crate) fn conv(net: &mut Net, p: &str, x: Act, cout: usize, g: Conv, bias: bool) -> Act {
    let (h, w) = g.out(x.h, x.w);
    let w_elems = x.c * g.kh * g.kw * cout;
    let kernel = net.param(&format!("{p}/weight"), w_elems);
    let out_elems = (cout * h * w) as f64;
    let flops = 2.0 * (x.c * g.kh * g.kw) as f64 * out_elems;
    let rule = Rule::Linear {
        dx: "Conv2DBackpropInput",
        dw: "Conv2DBackpropFilter",
        flops,
    };
    let mut t = net.op(
        "Conv2D",
        format!("{p}/Conv2D"),
        &[x.t, kernel],
        out_elems,
        true,
        flops,
        rule,
    );
    net.set_conv_window(t, Some(g.window()));
    if bias {
        let b = net.param(&format!("{p}/bias"), cout);
        t = net.op_like(
            "BiasAdd",
            format!("{p}/BiasAdd"),
            &[t, b],
            t,
            out_elems,
            Rule::Bias,
        );
    }
    Act { t, c: cout, h, w }
}

/// FusedBatchNorm with trainable gamma and beta (running statistics are not trainable).
pub(crate) fn batch_norm(net: &mut Net, p: &str, x: Act) -> Act {
    let gamma = net.param(&format!("{p}/gamma"), x.c);
    let beta = net.param(&format!("{p}/beta"), x.c);
    let rule = Rule::Norm {
        dx: "FusedBatchNormGrad",
        dgamma: "FusedBatchNormGradGamma",
        dbeta: "FusedBatchNormGradBeta",
    };
    // Statistics pass plus normalise-and-scale: about four flops per element.
    let t = net.op_like(
        "FusedBatchNorm",
        format!("{p}/FusedBatchNorm"),
        &[x.t, gamma, beta],
        x.t,
        4.0 * x.elems(),
        rule,
    );
    Act { t, ..x }
}

pub(crate) fn relu(net: &mut Net, p: &str, x: Act) -> Act {
    let t = net.op_like(
        "Relu",
        format!("{p}/Relu"),
        &[x.t],
        x.t,
        x.elems(),
        unary("ReluGrad", false, true, 1.0),
    );
    Act { t, ..x }
}

/// Conv without bias, BatchNorm, ReLU: torchvision's BasicConv2d and ResNet's conv-bn pairs.
pub(crate) fn conv_bn_relu(net: &mut Net, p: &str, x: Act, cout: usize, g: Conv) -> Act {
    let y = conv(net, &format!("{p}/conv"), x, cout, g, false);
    let y = batch_norm(net, &format!("{p}/bn"), y);
    relu(net, p, y)
}

/// Max or average pooling; `k` square window.
pub(crate) fn pool(net: &mut Net, p: &str, x: Act, max: bool, g: Conv) -> Act {
    let (h, w) = g.out(x.h, x.w);
    let out = (x.c * h * w) as f64;
    let window = (g.kh * g.kw) as f64;
    let (ty, rule) = if max {
        ("MaxPool", unary("MaxPoolGrad", true, true, window))
    } else {
        ("AvgPool", unary("AvgPoolGrad", false, false, window))
    };
    let t = net.op(
        ty,
        format!("{p}/{ty}"),
        &[x.t],
        out,
        true,
        window * out,
        rule,
    );
    Act { t, c: x.c, h, w }
}

/// Adaptive average pooling to `size x size` (an identity-sized op when the map already fits,
/// as torchvision's VGG and AlexNet at 224x224; kept because the framework graph has it).
pub(crate) fn adaptive_avg_pool(net: &mut Net, p: &str, x: Act, size: usize) -> Act {
    let out = (x.c * size * size) as f64;
    let t = net.op(
        "AvgPool",
        format!("{p}/AvgPool"),
        &[x.t],
        out,
        true,
        x.elems(),
        unary("AvgPoolGrad", false, false, 1.0),
    );
    Act {
        t,
        c: x.c,
        h: size,
        w: size,
    }
}

pub(crate) fn concat(net: &mut Net, p: &str, xs: &[Act]) -> Act {
    let c = xs.iter().map(|a| a.c).sum();
    let (h, w) = (xs[0].h, xs[0].w);
    debug_assert!(xs.iter().all(|a| a.h == h && a.w == w));
    let ts: Vec<T> = xs.iter().map(|a| a.t).collect();
    let t = net.op(
        "ConcatV2",
        format!("{p}/concat"),
        &ts,
        (c * h * w) as f64,
        true,
        0.0,
        Rule::Concat,
    );
    Act { t, c, h, w }
}

/// Flatten NCHW to (N, C*H*W) features.
pub(crate) fn flatten(net: &mut Net, p: &str, x: Act) -> T {
    net.op_like(
        "Reshape",
        format!("{p}/Reshape"),
        &[x.t],
        x.t,
        0.0,
        unary("Reshape", false, false, 0.0),
    )
}

/// Fully connected layer followed by ReLU.
fn dense_relu(net: &mut Net, p: &str, x: T, fin: usize, fout: usize) -> T {
    let h = dense(net, p, x, 1, fin, fout);
    layers::relu(net, p, h)
}

/// torchvision VGG classifier: (FC-ReLU-Dropout) x 2, FC.
fn vgg_classifier(net: &mut Net, x: T, fin: usize) -> T {
    let h = dense_relu(net, "classifier/fc1", x, fin, 4096);
    let h = dropout(net, "classifier/fc1", h);
    let h = dense_relu(net, "classifier/fc2", h, 4096, 4096);
    let h = dropout(net, "classifier/fc2", h);
    dense(net, "classifier/fc3", h, 1, 4096, CLASSES)
}

/// torchvision AlexNet classifier: (Dropout-FC-ReLU) x 2, FC.
fn alexnet_classifier(net: &mut Net, x: T, fin: usize) -> T {
    let h = dropout(net, "classifier/fc1_in", x);
    let h = dense_relu(net, "classifier/fc1", h, fin, 4096);
    let h = dropout(net, "classifier/fc2_in", h);
    let h = dense_relu(net, "classifier/fc2", h, 4096, 4096);
    dense(net, "classifier/fc3", h, 1, 4096, CLASSES)
}

/// torchvision VGG: 3x3 convs with bias and ReLU, 2x2 max pools, 7x7 adaptive pool, 3 FC layers.
pub(crate) fn vgg(net: &mut Net, convs_per_stage: &[usize]) {
    let mut x = image_input(net, 224);
    let widths = [64, 128, 256, 512, 512];
    let mut n = 0;
    for (stage, (&reps, &c)) in convs_per_stage.iter().zip(&widths).enumerate() {
        for _ in 0..reps {
            let p = format!("features/conv{n}");
            x = conv(net, &p, x, c, Conv::sq(3, 1, 1), true);
            x = relu(net, &p, x);
            n += 1;
        }
        x = pool(
            net,
            &format!("features/pool{stage}"),
            x,
            true,
            Conv::sq(2, 2, 0),
        );
    }
    let x = adaptive_avg_pool(net, "avgpool", x, 7);
    let f = flatten(net, "flatten", x);
    let logits = vgg_classifier(net, f, 512 * 7 * 7);
    net.xent_loss("loss", logits, 1.0, CLASSES as f64);
}

/// torchvision AlexNet (the one-GPU variant of Krizhevsky et al.).
pub(crate) fn alexnet(net: &mut Net) {
    let x = image_input(net, 224);
    let layers: [(usize, Conv, bool); 5] = [
        (64, Conv::sq(11, 4, 2), true),
        (192, Conv::sq(5, 1, 2), true),
        (384, Conv::sq(3, 1, 1), false),
        (256, Conv::sq(3, 1, 1), false),
        (256, Conv::sq(3, 1, 1), true),
    ];
    let mut x = x;
    for (i, &(c, g, pool_after)) in layers.iter().enumerate() {
        let p = format!("features/conv{i}");
        x = conv(net, &p, x, c, g, true);
        x = relu(net, &p, x);
        if pool_after {
            x = pool(
                net,
                &format!("features/pool{i}"),
                x,
                true,
                Conv::sq(3, 2, 0),
            );
        }
    }
    let x = adaptive_avg_pool(net, "avgpool", x, 6);
    let f = flatten(net, "flatten", x);
    let logits = alexnet_classifier(net, f, 256 * 6 * 6);
    net.xent_loss("loss", logits, 1.0, CLASSES as f64);
}

/// Residual add then ReLU.
fn add_relu(net: &mut Net, p: &str, a: Act, b: Act) -> Act {
    let t = net.op_like(
        "AddV2",
        format!("{p}/add"),
        &[a.t, b.t],
        a.t,
        a.elems(),
        Rule::Add,
    );
    relu(net, p, Act { t, ..a })
}

/// torchvision Bottleneck (v1.5: the stride sits on the 3x3 conv).
fn bottleneck(net: &mut Net, p: &str, x: Act, width: usize, stride: usize) -> Act {
    let out_c = width * 4;
    let h = conv_bn_relu(net, &format!("{p}/1"), x, width, Conv::sq(1, 1, 0));
    let h = conv_bn_relu(net, &format!("{p}/2"), h, width, Conv::sq(3, stride, 1));
    let h = conv(
        net,
        &format!("{p}/3/conv"),
        h,
        out_c,
        Conv::sq(1, 1, 0),
        false,
    );
    let h = batch_norm(net, &format!("{p}/3/bn"), h);
    let shortcut = if stride != 1 || x.c != out_c {
        let s = conv(
            net,
            &format!("{p}/downsample/conv"),
            x,
            out_c,
            Conv::sq(1, stride, 0),
            false,
        );
        batch_norm(net, &format!("{p}/downsample/bn"), s)
    } else {
        x
    };
    add_relu(net, p, h, shortcut)
}

/// torchvision ResNet with bottleneck blocks; `blocks` per stage ([3, 4, 23, 3] = ResNet-101).
pub(crate) fn resnet(net: &mut Net, blocks: &[usize]) {
    let x = image_input(net, 224);
    let x = conv_bn_relu(net, "conv1", x, 64, Conv::sq(7, 2, 3));
    let mut x = pool(net, "maxpool", x, true, Conv::sq(3, 2, 1));
    for (stage, &n) in blocks.iter().enumerate() {
        let width = 64 << stage;
        for b in 0..n {
            let stride = if b == 0 && stage > 0 { 2 } else { 1 };
            x = bottleneck(net, &format!("layer{}/{b}", stage + 1), x, width, stride);
        }
    }
    let x = adaptive_avg_pool(net, "avgpool", x, 1);
    let f = flatten(net, "flatten", x);
    let logits = dense(net, "fc", f, 1, 2048, CLASSES);
    net.xent_loss("loss", logits, 1.0, CLASSES as f64);
}

/// Two-hidden-layer perceptron on flattened 28x28 images: 784-512-256-10.
pub(crate) fn mlp(net: &mut Net) {
    let x = net.input("images", 784.0);
    let h = dense(net, "fc1", x, 1, 784, 512);
    let h = layers::relu(net, "fc1", h);
    let h = dense(net, "fc2", h, 1, 512, 256);
    let h = layers::relu(net, "fc2", h);
    let logits = dense(net, "fc3", h, 1, 256, 10);
    net.xent_loss("loss", logits, 1.0, 10.0);
}
